"""The records that flow between pipeline stages.

Plain dataclasses: cheap to pickle (Prefect persists task results) and easy to read.
Offsets are always character offsets into ``ExtractedDocument.text``; pages are 1-based.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from propdex.embed.plain_text import embedding_text


@dataclass(frozen=True)
class PageSpan:
    page: int  # 1-based page number
    start: int  # char offset of the page's first character in the document text
    end: int  # exclusive


@dataclass(frozen=True)
class SectionHint:
    title: str
    level: int
    char_start: int  # where the section begins in the document text


@dataclass(frozen=True)
class PageBox:
    """A rectangle of a page in PDF points, origin top left (as PyMuPDF gives it)."""

    page: int  # 1-based page number
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class TextRegion:
    """Characters ``[start, end)`` of the document text were read from ``box``; ``block``
    numbers the layout block (paragraph, heading, table...) within the document, so that
    the regions of one block (the rows of a table) can be merged back into one box."""

    start: int
    end: int
    box: PageBox
    block: int


@dataclass
class ExtractedDocument:
    source: str  # normalised absolute path or URI
    doc_id: str
    content_sha256: str  # of the file's bytes
    kind: str  # "pdf" | "epub" | "xps" | "mobi" | "fb2" | "text" | "markdown"
    text: str
    pages: list[PageSpan]
    title_hint: str | None = None  # PDF metadata title or a Markdown H1
    sections: list[SectionHint] = field(default_factory=list)  # outline / headings, by char_start
    page_count: int = 0
    ocr: bool = False  # text came from OCR
    encoding: str | None = None  # text files: the encoding the bytes were read in ("cp1252")
    # PDFs: running header, footer and page-number lines kept out of ``text``
    furniture_removed: int | None = None
    # PDFs: "layout" (PyMuPDF's layout engine) or "fast" (plain text lines); None otherwise
    pdf_reader: str | None = None
    # Pages the layout engine failed on, read in fast mode instead (1-based)
    layout_fallback_pages: list[int] = field(default_factory=list)
    # Page rectangles of the text, sorted by start (layout-mode PDFs only)
    regions: list[TextRegion] = field(default_factory=list)

    def pages_for(self, start: int, end: int) -> tuple[int, int]:
        """First and last page touched by text[start:end]."""
        first = last = self.pages[0].page if self.pages else 1
        for span in self.pages:
            if span.start <= start:
                first = span.page
            if span.start < end:
                last = span.page
        return first, max(first, last)

    def section_at(self, offset: int) -> str | None:
        current = None
        for hint in self.sections:
            if hint.char_start <= offset:
                current = hint.title
            else:
                break
        return current


@dataclass(frozen=True)
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_calls: int = 0  # answered from the content-addressed cache

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_calls + other.cached_calls,
        )


@dataclass
class DocumentContext:
    title: str
    summary: str
    title_truncated: bool = False  # the title was written from a bounded prefix
    summary_truncated: bool = False
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    # Set when the LLM's title or summary failed and the offline backend's stands in, e.g.
    # "summary: offline fallback (summary: invalid answer after one repair: ...)".
    fallback: str | None = None
    # Answers the deterministic checks rejected, also after the repair: "step: reason" -> count
    # ("title: placeholder": 1); each of them fell back (see ``fallback``).
    checks_rejected: dict[str, int] = field(default_factory=dict)


@dataclass
class Chunk:
    chunk_id: str
    doc_id: str
    ordinal: int
    text: str
    char_start: int
    char_end: int
    page_start: int
    page_end: int
    section: str | None = None
    header: str = ""  # contextual chunk header; embedded: header + "\n\n" + text, Markdown marks out
    # A part of a table split between rows: the caption and header rows its text lacks (they
    # go into the header and precede the text that propositions are written from).
    table_head: str = ""

    @property
    def embed_text(self) -> str:
        return embedding_text(f"{self.header}\n\n{self.text}" if self.header else self.text)

    @property
    def prompt_text(self) -> str:
        """The text propositions are written from and graded against: the chunk text, after
        the table head it lacks (one newline apart, so the rows read as one table)."""
        return f"{self.table_head}\n{self.text}" if self.table_head else self.text


@dataclass
class DocumentChunks:
    """The chunking stage's outcome for one document."""

    chunks: list[Chunk]
    usage: Usage = field(default_factory=Usage)  # LLM calls of the llm chunker and of sectioning


@dataclass(frozen=True)
class Scores:
    accuracy: int
    clarity: int
    completeness: int
    conciseness: int

    def passes(self, thresholds: dict[str, int]) -> bool:
        return all(getattr(self, name) >= limit for name, limit in thresholds.items())


@dataclass
class Proposition:
    prop_id: str
    chunk_id: str
    doc_id: str
    ordinal: int
    text: str
    scores: Scores | None  # None: its chunk's grading failed (stored ungraded, not passed)
    passed: bool
    # The document-text span of the table row it states, when it states one row's cells.
    row_span: tuple[int, int] | None = None
    # Why it did not pass: a check's reason ("ungrounded", "empty", "too short", "duplicate"),
    # else "grade out of range", "below threshold" or "ungraded"; None when it passed.
    reject_reason: str | None = None


@dataclass
class GraderWatch:
    """How a grading model's grades compared with the checks, counted over propositions."""

    model: str
    graded: int = 0
    out_of_range: int = 0  # propositions with a grade outside 1..10
    rejected_by_checks: int = 0  # graded propositions that the checks rejected
    passed_rejected: int = 0  # ...which the grader's grades would have passed

    def __add__(self, other: GraderWatch) -> GraderWatch:
        return GraderWatch(self.model, self.graded + other.graded,
                           self.out_of_range + other.out_of_range,
                           self.rejected_by_checks + other.rejected_by_checks,
                           self.passed_rejected + other.passed_rejected)


@dataclass
class ChunkPropositions:
    """The proposition stage's outcome for one chunk."""

    chunk_id: str
    propositions: list[Proposition]
    error: str | None = None  # set when extraction or grading failed (after one repair)
    usage: Usage = field(default_factory=Usage)
    grader: GraderWatch | None = None  # how the grader's grades compare with the checks

    @property
    def ungraded(self) -> int:
        return sum(p.scores is None for p in self.propositions)
