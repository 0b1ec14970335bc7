"""The run report as Markdown (published as a Prefect artifact, printed by the CLI)."""

from __future__ import annotations

from propdex.extract.encoding import UTF8
from propdex.pipeline.outcome import DocumentOutcome, RunSummary


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def grader_agreement(counts: dict[str, int]) -> str:
    """How far a grading model agreed with the checks, in one sentence."""
    rejected, passed = counts.get("rejected_by_checks", 0), counts.get("passed_rejected", 0)
    if rejected:
        verdict = ("its grades are not informative" if passed == rejected else
                   "it agreed with the checks" if passed == 0 else "it agreed with the checks in part")
        sentence = (f"grader passed {passed} of {rejected} propositions that the checks "
                    f"rejected: {verdict}")
    else:
        sentence = f"the checks rejected none of the {counts.get('graded', 0)} propositions graded"
    if counts.get("out_of_range"):
        sentence += f"; {counts['out_of_range']} propositions had a grade out of 1..10"
    return sentence + "."


def render_markdown(summary: RunSummary) -> str:
    totals = summary.totals()
    indexed = [d for d in summary.documents if d.status == "indexed"]
    lines = [
        f"# propdex ingest run `{summary.run_id}`",
        "",
        f"Database: `{summary.db}` · LLM backend: `{summary.llm}` · {summary.seconds:.1f} s",
        "",
        "| documents | count |",
        "|---|---|",
        f"| indexed | {len(indexed)} |",
        f"| unchanged (skipped) | {len(summary.unchanged)} |",
        f"| failed | {len(summary.failed)} |",
        f"| removed from the index | {len(summary.removed)} |",
        f"| metadata updated (not re-processed) | {len(summary.metadata_updated)} |",
        "",
        "| totals | value |",
        "|---|---|",
    ]
    lines += [f"| {k.replace('_', ' ')} | {int(v)} |" for k, v in totals.items()]
    furniture = [d.furniture_removed for d in indexed if d.furniture_removed is not None]
    if furniture:
        lines.append(f"| running header/footer lines removed | {sum(furniture)} |")
    if summary.structured_output:
        lines += ["", "Structured output: " + "; ".join(_cell(n) for n in summary.structured_output)]
    if summary.stopped:
        lines += ["", f"**Run stopped:** {_cell(summary.stopped)}"]
    if summary.refused:
        lines += ["", "**Refused (outside the allowed roots, not read):**", ""]
        lines += [f"- {_cell(path)}: {_cell(reason)}" for path, reason in summary.refused]
    fallbacks = [d for d in indexed if d.layout_fallback_pages]
    if fallbacks:
        lines += ["", "**Pages the layout engine failed on (read in fast mode):**", ""]
        lines += [f"- {_cell(d.source)}: page(s) {', '.join(map(str, d.layout_fallback_pages))}"
                  for d in fallbacks]
    legacy = [d for d in indexed if d.encoding not in (None, UTF8)]
    if legacy:
        # Worth a look: a guessed legacy encoding can be wrong on short or mixed files.
        lines += ["", "**Read in a legacy encoding (not UTF-8):**", ""]
        lines += [f"- {_cell(d.source)}: {_cell(d.encoding)}" for d in legacy]
    if not summary.wrote:
        lines += ["", "Nothing changed: no LLM call, no embedding and no write were made."]
    stages = summary.stage_seconds()
    if stages:
        lines += ["", "| stage | seconds |", "|---|---|"]
        lines += [f"| {stage} | {seconds:.2f} |" for stage, seconds in stages.items()]
    if summary.documents:
        lines += [
            "", "| source | status | reason | chunks | kept | rejected | ungraded | LLM calls | tokens | error |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for d in summary.documents:
            lines.append(
                f"| {_cell(d.source)} | {d.status} | {_cell(_reason(d))} | {d.chunks} | "
                f"{d.propositions_kept} | {d.propositions_rejected} | {d.propositions_ungraded} | "
                f"{d.llm_calls} | {d.prompt_tokens + d.completion_tokens} | {_cell(d.error or '')} |"
            )
    rejected = summary.checks_rejected()
    if rejected:
        lines += ["", "| step | rejected by the checks | answers |", "|---|---|---|"]
        for key, count in rejected.items():
            step, _, reason = key.partition(": ")
            lines.append(f"| {_cell(step)} | {_cell(reason)} | {count} |")
    for model, counts in summary.grader().items():
        lines += ["", f"Grader `{_cell(model)}`: {grader_agreement(counts)}"]
    if summary.context_fallbacks:
        lines += ["", "**Title or summary from the offline fallback (retried next run):**", ""]
        lines += [f"- {_cell(d.source)}: {_cell(d.context_fallback)}" for d in summary.context_fallbacks]
    for title, items in (("Removed sources", summary.removed), ("Not found", summary.missing),
                         ("Metadata updated", summary.metadata_updated)):
        if items:
            lines += ["", f"**{title}:**", ""] + [f"- {_cell(s)}" for s in items]
    return "\n".join(lines) + "\n"


def render_log_lines(summary: RunSummary) -> list[str]:
    """The run report in a few plain lines for the flow run's logs (the Prefect UI's Logs tab,
    where a scheduled run is read first): the counts, then one line per document that failed
    or was skipped and per source that matched nothing."""
    indexed = sum(d.status == "indexed" for d in summary.documents)
    counts = (f"indexed {indexed}, unchanged {len(summary.unchanged)}, failed "
              f"{len(summary.failed)}, removed {len(summary.removed)}, not found "
              f"{len(summary.missing)}")
    if not summary.wrote:
        counts += ": nothing new to load, the index is unchanged"
    lines = [f"propdex ingest into {summary.db}: {counts} ({summary.seconds:.1f} s; "
             "the propdex-ingest-report artifact has the details)"]
    lines += [f"{d.source}: {d.status}: {d.error}" for d in summary.failed]
    lines += [f"sources: {path}: no such file, folder or matching glob"
              for path in summary.missing]
    return lines


def _reason(document: DocumentOutcome) -> str:
    """Why a document was processed, with what changed when its settings did."""
    return f"{document.reason}: {document.changed}" if document.changed else document.reason
