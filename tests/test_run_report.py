"""The run report's notes on how documents were read: legacy encodings, page furniture."""

from __future__ import annotations

from propdex.pipeline.outcome import DocumentOutcome, RunSummary
from propdex.pipeline.report import render_markdown


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
