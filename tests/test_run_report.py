"""The run report's notes on how documents were read: legacy encodings, page furniture."""

from __future__ import annotations

from propdex.pipeline.outcome import DocumentOutcome, RunSummary
from propdex.pipeline.report import render_log_lines, render_markdown


def report(*documents: DocumentOutcome) -> str:
    return render_markdown(RunSummary(run_id="r1", db="/tmp/db", llm="offline",
                                      documents=list(documents)))


def test_report_names_documents_read_in_a_legacy_encoding() -> None:
    text = report(
        DocumentOutcome(source="/docs/menu.txt", doc_id="a", status="indexed", encoding="cp1252"),
        DocumentOutcome(source="/docs/notes.md", doc_id="b", status="indexed", encoding="utf-8"),
    )
    section = text.split("**Read in a legacy encoding (not UTF-8):**")[1].split("\n\n")[1]
    assert "- /docs/menu.txt: cp1252" == section.strip()


def test_report_says_nothing_about_encodings_when_all_are_utf8() -> None:
    text = report(DocumentOutcome(source="/docs/notes.md", doc_id="b", status="indexed",
                                  encoding="utf-8"))
    assert "legacy encoding" not in text


def test_report_totals_the_page_furniture_removed() -> None:
    text = report(
        DocumentOutcome(source="/docs/a.pdf", doc_id="a", status="indexed", furniture_removed=36),
        DocumentOutcome(source="/docs/b.pdf", doc_id="b", status="indexed", furniture_removed=14),
    )
    assert "| running header/footer lines removed | 50 |" in text.split("\n")


def test_report_names_the_pages_the_layout_engine_failed_on() -> None:
    text = report(
        DocumentOutcome(source="/docs/a.pdf", doc_id="a", status="indexed",
                        layout_fallback_pages=[2, 7]),
        DocumentOutcome(source="/docs/b.pdf", doc_id="b", status="indexed"),
    )
    section = text.split("**Pages the layout engine failed on (read in fast mode):**")[1]
    assert "- /docs/a.pdf: page(s) 2, 7" == section.split("\n\n")[1].strip()


def test_report_counts_the_answers_the_checks_rejected_per_step_and_reason() -> None:
    text = report(
        DocumentOutcome(source="/docs/a.md", doc_id="a", status="indexed",
                        checks_rejected={"propositions: ungrounded": 2, "title: placeholder": 1}),
        DocumentOutcome(source="/docs/b.md", doc_id="b", status="indexed",
                        checks_rejected={"propositions: ungrounded": 3}),
    )
    rows = [line for line in text.split("\n") if line.startswith(("| propositions |", "| title |"))]
    assert ["| propositions | ungrounded | 5 |", "| title | placeholder | 1 |"] == rows


def grader_line(model: str, graded: int, out_of_range: int, rejected: int, passed: int) -> str:
    counts = {"graded": graded, "out_of_range": out_of_range, "rejected_by_checks": rejected,
              "passed_rejected": passed}
    text = report(DocumentOutcome(source="/docs/a.md", doc_id="a", status="indexed",
                                  grader={model: counts}))
    return next(line for line in text.split("\n") if line.startswith("Grader "))


def test_report_says_a_grader_that_passed_every_rejected_proposition_is_not_informative() -> None:
    assert ("Grader `gemma-3-270m`: grader passed 51 of 51 propositions that the checks "
            "rejected: its grades are not informative.") == grader_line("gemma-3-270m", 60, 0, 51, 51)


def test_report_counts_grades_out_of_range() -> None:
    assert ("Grader `m`: the checks rejected none of the 4 propositions graded; 2 propositions "
            "had a grade out of 1..10.") == grader_line("m", 4, 2, 0, 0)


def test_log_lines_count_the_documents_and_name_each_failure_and_missing_source() -> None:
    summary = RunSummary(run_id="r1", db="/tmp/db", llm="offline", seconds=2.0,
                         unchanged=["/docs/b.md"], missing=["/docs/gone"], documents=[
                             DocumentOutcome(source="/docs/a.md", doc_id="a", status="indexed"),
                             DocumentOutcome(source="/docs/bad.pdf", doc_id="c", status="failed",
                                             error="truncated PDF (no %%EOF marker)")])
    assert [
        "propdex ingest into /tmp/db: indexed 1, unchanged 1, failed 1, removed 0, not found 1 "
        "(2.0 s; the propdex-ingest-report artifact has the details)",
        "/docs/bad.pdf: failed: truncated PDF (no %%EOF marker)",
        "sources: /docs/gone: no such file, folder or matching glob",
    ] == render_log_lines(summary)


def test_log_lines_of_a_run_with_nothing_changed_say_so() -> None:
    summary = RunSummary(run_id="r1", db="/tmp/db", llm="offline", unchanged=["/docs/a.md"])
    assert ["propdex ingest into /tmp/db: indexed 0, unchanged 1, failed 0, removed 0, not found 0"
            ": nothing new to load, the index is unchanged (0.0 s; the propdex-ingest-report "
            "artifact has the details)"] == render_log_lines(summary)
