"""The offline backend: rule-based title, summary, propositions and grades, no model calls.

A fallback of lower quality than an LLM, used when no LLM is configured. It keeps the
source's own wording (it cannot paraphrase), resolves only leading pronouns and grades with
surface checks. Every method is deterministic, thread-safe and costs a few milliseconds per
chunk; ``Usage()`` is returned because nothing is called.

Rules (each rule set is versioned in ``prompt_versions``; the full rules are in the modules
of ``propdex.llm.offline_rules``):

title (offline-title-v3)
    The hint (PDF metadata title) when plausible; else the first heading-like line: a
    Markdown heading, or 3-15 mostly capitalised words that are not a page number, URL,
    date, arXiv/DOI id or author list and do not end with a period (a title wrapped over
    lines is rejoined); else the first sentence cut to 12 words.
summary (offline-summary-v4)
    One sentence of at most ~40 words: the first sentence after an "Abstract" label, or
    else the first informative sentence once front matter (title lines, authors, e-mails,
    affiliations, ids, dates, copyright, keywords, contents) is skipped; never a table row. Segmented with
    pysbd on the first 6,000 characters only; "We ..." becomes "The authors ...".
propositions (offline-propositions-v4)
    pysbd sentences minus fragments (< 4 words, no verb, mostly symbols, reference
    entries, bare captions); pieces of sentences cut by the chunk's edges kept as found;
    coordinated independent clauses split at ", and"/", but"/", while"/", whereas"/";"
    when both sides have >= 4 words and a verb; a leading pronoun replaced by the latest
    fitting subject in the chunk or the title ("We" -> "The authors"); citations removed;
    min/max counts (a chunk holding a table may give one per table cell, see
    ``propdex.llm.proposition_counts``) and the character limit from Settings. A Markdown block quote (the
    layout reader's footnotes) loses its "> " and the footnote's mark. Each row of a Markdown table
    becomes statements naming the table (caption's "Table N" and subject), the row (first
    cell) and the columns (header cells): "In Table 2 (...), for Transformer (big), BLEU
    EN-DE is 28.4, ...".
grading (offline-grading-v4)
    accuracy = share of content words found in the chunk, measured as the checks do
    (``propdex.checks.words``; 10 when all are); clarity,
    completeness and conciseness start at 10 and lose points for unresolved pronouns and
    broken characters, missing verbs/closing punctuation/unmatched brackets/short length,
    and length over 35 words (-1 to -3)/semicolons/joined clauses/repeated words.
"""

from __future__ import annotations

from dataclasses import replace

from propdex.llm.base import LLMBackend, LLMResult
from propdex.llm.offline_rules.grading import grade_propositions
from propdex.llm.offline_rules.propositions import PropositionLimits, make_propositions
from propdex.llm.offline_rules.summaries import make_summary
from propdex.llm.offline_rules.titles import make_title
from propdex.llm.proposition_counts import most_propositions
from propdex.models import Scores
from propdex.settings import Settings

PROMPT_VERSIONS = {
    "title": "offline-title-v3",
    "summary": "offline-summary-v4",
    "propositions": "offline-propositions-v4",
    "grading": "offline-grading-v4",
}


class OfflineBackend(LLMBackend):
    """Rule-based stand-in for an LLM (see the module docstring for the rules)."""

    name = "offline"

    def __init__(self, settings: Settings):
        self.settings = settings
        self.limits = PropositionLimits(
            min_count=settings.min_propositions,
            max_count=settings.max_propositions,
            max_chars=settings.max_proposition_chars,
        )

    def prompt_versions(self) -> dict[str, str]:
        return dict(PROMPT_VERSIONS)

    def title(self, text: str, *, truncated: bool, hint: str | None) -> LLMResult[str]:
        return LLMResult(make_title(text, hint))

    def summary(self, text: str, *, title: str, truncated: bool) -> LLMResult[str]:
        return LLMResult(make_summary(text, title))

    def propositions(
        self, chunk_text: str, *, title: str, section: str | None
    ) -> LLMResult[list[str]]:
        limits = replace(self.limits, max_count=most_propositions(chunk_text, self.settings))
        return LLMResult(make_propositions(chunk_text, title, limits))

    def grade(
        self, chunk_text: str, propositions: list[str], *, title: str, section: str | None
    ) -> LLMResult[list[Scores]]:
        return LLMResult(grade_propositions(chunk_text, propositions, title, section))
