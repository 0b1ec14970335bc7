"""Typed flow parameters: the Prefect UI renders these as the run form."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from propdex.settings import Settings

# The choice that leaves a setting to its PROPDEX_* variable, then to propdex's default. A
# real value rather than null: the Prefect UI renders a plain enum as a drop-down, while an
# optional one (anyOf enum/null) hides it behind a type switch.
DEFAULT = "default"
LLMChoice = Literal["default", "offline", "openai"]
ChunkerChoice = Literal["default", "fixed", "recursive", "passages", "semantic", "llm"]
EmbedderChoice = Literal["default", "minilm", "openai"]
PdfReaderChoice = Literal["default", "layout", "fast"]


class IngestOptions(BaseModel):
    """Settings a user may change per run. Empty fields (and "default" choices) fall back to
    PROPDEX_* environment variables, then to propdex's defaults. API keys are never
    parameters: they come from the environment (or a Prefect Secret block) of the process
    that runs the flow."""

    llm: LLMChoice = Field(
        DEFAULT, title="LLM backend",
        description="default: openai when PROPDEX_LLM_BASE_URL is set, else offline (rules, no model).",
    )
    llm_model: str | None = Field(None, title="LLM model", description="Model for every LLM step.")
    chunk_size: int | None = Field(
        None, ge=50, title="Chunk size (characters)", description="Target chunk length; default 800."
    )
    chunk_overlap: int | None = Field(
        None, ge=0, title="Chunk overlap (characters)",
        description="Characters shared with the previous chunk; default 0.",
    )
    chunker: ChunkerChoice = Field(
        DEFAULT, title="Chunker", description="Chunking method; default recursive (llm needs an LLM)."
    )
    sectioning: bool | None = Field(
        None, title="Semantic sectioning",
        description="Divide documents into titled semantic sections before chunking; default off.",
    )
    threshold: int | None = Field(
        None, ge=1, le=10, title="Pass threshold (1-10)",
        description="Minimum grade on all four criteria for a proposition to pass; default 7.",
    )
    embedder: EmbedderChoice = Field(
        DEFAULT, title="Embedder", description="default: local MiniLM (all-MiniLM-L6-v2)."
    )
    llm_concurrency: int | None = Field(
        None, ge=1, title="LLM requests in flight", description="Across the run; default 8."
    )
    llm_rpm: int | None = Field(
        None, ge=0, title="LLM requests per minute", description="Across the run; 0 = unlimited (default)."
    )
    document_concurrency: int | None = Field(
        None, ge=1, title="Documents at once", description="Documents processed at once; default 4."
    )

    pdf_reader: PdfReaderChoice = Field(
        DEFAULT, title="PDF reader",
        description="default: layout (PyMuPDF's layout engine: headings, lists, tables, page "
        "regions); fast: plain text lines, about a hundred times faster.",
    )

    @field_validator("llm", "chunker", "embedder", "pdf_reader", mode="before")
    @classmethod
    def _empty_is_default(cls, value: object) -> object:
        # The CLI passes None for a flag left out; older saved parameters hold null.
        return DEFAULT if value is None else value

    def settings(self, db: str) -> Settings:
        values = {k: v for k, v in self.model_dump(exclude_none=True).items() if v != DEFAULT}
        threshold = values.pop("threshold", None)
        if threshold is not None:
            for name in ("accuracy", "clarity", "completeness", "conciseness"):
                values[f"threshold_{name}"] = threshold
        return Settings(db=db, **values)


Cutoff = Annotated[int, Field(ge=1)]


class EvaluateOptions(BaseModel):
    """Settings of one evaluation run. The embedder comes from PROPDEX_* environment variables
    and must be the one the index was built with (vectors of two models cannot be compared);
    the LLM for answer quality too, its key from the environment only."""

    ks: list[Cutoff] = Field(
        [1, 5, 20], min_length=1, title="Recall cut-offs (k)", description="Cut-offs k of passage-level Recall@k."
    )
    budgets: list[Cutoff] = Field(
        [100, 200, 500], min_length=1, title="Word budgets",
        description="Word budgets l of answer recall within the first l retrieved words.",
    )
    top_k: int = Field(
        5, ge=1, title="Top units", description="Top units counted as retrieved words and given to the answer writer."
    )
    answer_quality: bool = Field(
        False, title="Answer quality",
        description="Write an answer from each unit's top units and grade it 0-10 (needs an LLM).",
    )
    llm_model: str | None = Field(
        None, title="LLM model", description="Model that writes and grades answers; default PROPDEX_LLM_MODEL."
    )

    def settings(self, db: str) -> Settings:
        return Settings(db=db, **({"llm_model": self.llm_model} if self.llm_model else {}))
