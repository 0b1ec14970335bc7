"""What a run did, per document and in total: the run artifact and the CLI print this."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from propdex.models import Usage


@dataclass
class DocumentOutcome:
    source: str
    doc_id: str
    status: str  # indexed | failed | skipped
    reason: str = ""  # why it was (re-)processed, or why it failed
    changed: str | None = None  # "settings changed": what (propdex.pipeline.plan.what_changed)
    error: str | None = None
    error_kind: str | None = None  # input | llm | configuration | timeout | storage | internal
    chunks: int = 0
    propositions_kept: int = 0
    propositions_rejected: int = 0
    propositions_ungraded: int = 0  # their chunk's grading failed: stored, not searchable
    chunk_failures: int = 0
    llm_calls: int = 0
    cached_llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embeddings_computed: int = 0
    encoding: str | None = None  # text files: the encoding read (reported when not UTF-8)
    furniture_removed: int | None = None  # PDFs: running header/footer lines left out
    # PDFs: pages the layout engine failed on, read in fast mode instead
    layout_fallback_pages: list[int] = field(default_factory=list)
    embed_truncated: int | None = None  # texts the embedder could not read whole; None = unknown
    stage_seconds: dict[str, float] = field(default_factory=dict)
    context_fallback: str | None = None  # title/summary from the offline backend, and why
    structured_output: list[str] = field(default_factory=list)  # negotiated form per model
    # Answers the deterministic checks rejected: "step: reason" -> count.
    checks_rejected: dict[str, int] = field(default_factory=dict)
    # Per grading model: graded, out_of_range, rejected_by_checks, passed_rejected.
    grader: dict[str, dict[str, int]] = field(default_factory=dict)

    def count_as_reused(self, usage: Usage, embeddings: int) -> None:
        """Take out of this run's counts the work of stage results an earlier run computed
        (Prefect's task cache returned them): their LLM calls count as cached calls, their
        tokens and embeddings as nothing this run paid for."""
        self.llm_calls -= usage.calls
        self.cached_llm_calls += usage.calls
        self.prompt_tokens -= usage.prompt_tokens
        self.completion_tokens -= usage.completion_tokens
        self.embeddings_computed -= embeddings


@dataclass
class RunSummary:
    run_id: str
    db: str
    llm: str
    documents: list[DocumentOutcome] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    swept_rows: int = 0
    seconds: float = 0.0
    stopped: str | None = None  # a configuration error that stopped the run
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): outside the roots
    metadata_updated: list[str] = field(default_factory=list)  # unchanged sources given new metadata

    @property
    def failed(self) -> list[DocumentOutcome]:
        return [d for d in self.documents if d.status != "indexed"]

    @property
    def wrote(self) -> bool:
        return bool(self.documents or self.removed or self.swept_rows or self.metadata_updated)

    def totals(self) -> dict[str, float]:
        keys = ("chunks", "propositions_kept", "propositions_rejected", "propositions_ungraded",
                "chunk_failures",
                "llm_calls", "cached_llm_calls", "prompt_tokens", "completion_tokens",
                "embeddings_computed")
        totals: dict[str, float] = {k: sum(getattr(d, k) for d in self.documents) for k in keys}
        # Endpoints cannot tell what they cut (None): the total counts what is known.
        totals["embed_truncated"] = sum(d.embed_truncated or 0 for d in self.documents)
        return totals

    @property
    def structured_output(self) -> list[str]:
        """The structured-output form each model settled on, said once for the run."""
        return sorted({note for d in self.documents for note in d.structured_output})

    @property
    def context_fallbacks(self) -> list[DocumentOutcome]:
        return [d for d in self.documents if d.context_fallback]

    def checks_rejected(self) -> dict[str, int]:
        """Answers the checks rejected over the run, per "step: reason"."""
        counts: dict[str, int] = {}
        for doc in self.documents:
            for key, count in doc.checks_rejected.items():
                counts[key] = counts.get(key, 0) + count
        return dict(sorted(counts.items()))

    def grader(self) -> dict[str, dict[str, int]]:
        """Per grading model, its grades against the checks over the run."""
        totals: dict[str, dict[str, int]] = {}
        for doc in self.documents:
            for model, counts in doc.grader.items():
                total = totals.setdefault(model, dict.fromkeys(counts, 0))
                for key, count in counts.items():
                    total[key] = total.get(key, 0) + count
        return totals

    def stage_seconds(self) -> dict[str, float]:
        seconds: dict[str, float] = {}
        for doc in self.documents:
            for stage, value in doc.stage_seconds.items():
                seconds[stage] = seconds.get(stage, 0.0) + value
        return seconds

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(
            indexed=sum(d.status == "indexed" for d in self.documents),
            structured_output=self.structured_output,
            failed=len(self.failed), totals=self.totals(), stage_seconds=self.stage_seconds(),
            wrote=self.wrote, checks_rejected_totals=self.checks_rejected(),
            grader_totals=self.grader(),
        )
        return data
