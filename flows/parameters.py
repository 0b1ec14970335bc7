"""Typed flow parameters: the Prefect UI renders these as the run form."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from propdex.settings import Settings


class IngestOptions(BaseModel):
    """Settings a user may change per run. Empty fields fall back to PROPDEX_* environment
    variables, then to propdex's defaults. API keys are never parameters: they come from the
    environment (or a Prefect Secret block) of the process that runs the flow."""

    llm: Literal["offline", "openai"] | None = Field(
        None, description="LLM backend. Empty: openai when PROPDEX_LLM_BASE_URL is set, else offline."
    )
    llm_model: str | None = Field(None, description="Model for every LLM step.")
    chunk_size: int | None = Field(None, ge=50, description="Target chunk length (characters); default 800.")
    chunk_overlap: int | None = Field(None, ge=0, description="Characters shared with the previous chunk; default 0.")
    chunker: Literal["fixed", "recursive", "passages", "semantic", "llm"] | None = Field(
        None, description="Chunking method; default recursive (llm needs an LLM)."
    )
    sectioning: bool | None = Field(
        None, description="Divide documents into titled semantic sections before chunking; default off."
    )
    threshold: int | None = Field(
        None, ge=1, le=10, description="Minimum grade (1-10) on all four criteria for a proposition to pass; default 7."
    )
    embedder: Literal["minilm", "openai"] | None = Field(None, description="Embedder; default local MiniLM.")
    llm_concurrency: int | None = Field(None, ge=1, description="LLM requests in flight; default 8.")
    llm_rpm: int | None = Field(None, ge=0, description="LLM requests per minute; 0 = unlimited.")
    document_concurrency: int | None = Field(None, ge=1, description="Documents processed at once; default 4.")

    def settings(self, db: str) -> Settings:
        values = self.model_dump(exclude_none=True)
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

    ks: list[Cutoff] = Field([1, 5, 20], min_length=1, description="Cut-offs k of passage-level Recall@k.")
    budgets: list[Cutoff] = Field(
        [100, 200, 500], min_length=1, description="Word budgets l of answer recall within the first l retrieved words."
    )
    top_k: int = Field(5, ge=1, description="Top units counted as retrieved words and given to the answer writer.")
    answer_quality: bool = Field(
        False, description="Write an answer from each unit's top units and grade it 0-10 (needs an LLM)."
    )
    llm_model: str | None = Field(None, description="Model that writes and grades answers; default PROPDEX_LLM_MODEL.")

    def settings(self, db: str) -> Settings:
        return Settings(db=db, **({"llm_model": self.llm_model} if self.llm_model else {}))
