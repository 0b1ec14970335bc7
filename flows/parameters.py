"""Typed flow parameters: the Prefect UI renders these as the run form."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic.fields import FieldInfo

from propdex.metadata import Metadata, normalise
from propdex.settings import Settings

# The choice that leaves a setting to its PROPDEX_* variable, then to propdex's default. A
# real value rather than null: the Prefect UI renders a plain enum as a drop-down, while an
# optional one (anyOf enum/null) hides it behind a type switch.
DEFAULT = "default"
LLMChoice = Literal["default", "offline", "openai"]
ChunkerChoice = Literal["default", "fixed", "recursive", "passages", "semantic", "llm"]
EmbedderChoice = Literal["default", "minilm", "openai"]
PdfReaderChoice = Literal["default", "layout", "fast"]
# A yes/no setting with its fallback as a third choice: a checkbox has no "not set".
SwitchChoice = Literal["default", "on", "off"]
SWITCH_VALUES = {"on": True, "off": False}


def form_label(title: str) -> FieldInfo:
    """The label the run form shows for a flow's own parameter, as ``Annotated[type,
    form_label("...")]``; its description comes from the flow docstring's Args section.

    Prefect builds a flow's parameter schema with ``title=<parameter name>``, which overrides
    a ``Field(title=...)``; only ``json_schema_extra`` is applied after it."""
    return Field(json_schema_extra={"title": title})


def plain_input(schema: dict[str, Any]) -> None:
    """Show an optional number or text as a plain number or text box in the run form.

    ``int | None`` becomes ``anyOf: [integer, null]`` (``str | None``: ``[string, null]``),
    which the Prefect UI renders behind a type switch to flip before typing. Schema-wise the
    field is an integer (a string) without a default: the form shows an empty box and leaves
    the field out of the run's parameters while it stays empty, and the model still reads a
    missing field as None (PROPDEX_* variables, then propdex's default)."""
    [value] = [option for option in schema.pop("anyOf") if option.get("type") != "null"]
    schema.update(value)
    schema.pop("default", None)


def blank_is_none(value: object) -> object:
    """A text box cleared to spaces means "not set", like one left empty."""
    return None if isinstance(value, str) and not value.strip() else value


class IngestOptions(BaseModel):
    """Settings a user may change per run. Empty fields (and "default" choices) fall back to
    PROPDEX_* environment variables, then to propdex's defaults. API keys are never
    parameters: they come from the environment (or a Prefect Secret block) of the process
    that runs the flow."""

    llm: LLMChoice = Field(
        DEFAULT, title="LLM backend",
        description="default: openai when PROPDEX_LLM_BASE_URL is set, else offline (rules, no model).",
    )
    llm_model: str | None = Field(
        None, title="LLM model",
        description="Model for every LLM step; empty: PROPDEX_LLM_MODEL, else gpt-4o-mini.",
        json_schema_extra=plain_input,
    )
    chunk_size: int | None = Field(
        None, ge=50, title="Chunk size (characters)", description="Target chunk length; default 800.",
        json_schema_extra=plain_input,
    )
    chunk_overlap: int | None = Field(
        None, ge=0, title="Chunk overlap (characters)",
        description="Characters shared with the previous chunk; default 0.",
        json_schema_extra=plain_input,
    )
    chunker: ChunkerChoice = Field(
        DEFAULT, title="Chunker", description="Chunking method; default recursive (llm needs an LLM)."
    )
    sectioning: SwitchChoice = Field(
        DEFAULT, title="Semantic sectioning",
        description="Divide documents into titled semantic sections before chunking "
                    "(default: PROPDEX_SECTIONING, else off).",
    )
    threshold: int | None = Field(
        None, ge=1, le=10, title="Pass threshold (1-10)",
        description="Minimum grade on all four criteria for a proposition to pass; default 7.",
        json_schema_extra=plain_input,
    )
    embedder: EmbedderChoice = Field(
        DEFAULT, title="Embedder", description="default: local MiniLM (all-MiniLM-L6-v2)."
    )
    llm_concurrency: int | None = Field(
        None, ge=1, title="LLM requests in flight", description="Across the run; default 8.",
        json_schema_extra=plain_input,
    )
    llm_rpm: int | None = Field(
        None, ge=0, title="LLM requests per minute", description="Across the run; 0 = unlimited (default).",
        json_schema_extra=plain_input,
    )
    document_concurrency: int | None = Field(
        None, ge=1, title="Documents at once",
        description="Documents processed at once, at most; default 4 (PROPDEX_DOCUMENT_CONCURRENCY).",
        json_schema_extra=plain_input,
    )
    metadata: dict[str, str | list[str]] | None = Field(
        None, title="Metadata",
        description="KEY: VALUE pairs (a value may be a list) given to every document of the "
                    "run; a file's front matter or <file>.meta.json wins key by key. Searches "
                    "filter on them with where.",
    )

    @field_validator("metadata")
    @classmethod
    def _valid_metadata(cls, value: dict | None) -> dict | None:
        if value is not None:
            normalise(value, "metadata")  # MetadataError (a ValueError) names the key
        return value

    def document_metadata(self) -> Metadata:
        """The run's metadata for every document, normalised."""
        return normalise(self.metadata or {}, "metadata")

    pdf_reader: PdfReaderChoice = Field(
        DEFAULT, title="PDF reader",
        description="default: layout (PyMuPDF's layout engine: headings, lists, tables, page "
        "regions); fast: plain text lines, about a hundred times faster.",
    )

    @field_validator("llm", "chunker", "embedder", "pdf_reader", "sectioning", mode="before")
    @classmethod
    def _empty_is_default(cls, value: object) -> object:
        # The CLI passes None for a flag left out; older saved parameters hold null (and
        # true/false for sectioning, as does the CLI's --sectioning/--no-sectioning).
        if isinstance(value, bool):
            return "on" if value else "off"
        return DEFAULT if value is None else value

    _blank_model = field_validator("llm_model", mode="before")(blank_is_none)

    def settings(self, db: str) -> Settings:
        values = {k: v for k, v in self.model_dump(exclude_none=True, exclude={"metadata"}).items()
                  if v != DEFAULT}
        if "sectioning" in values:
            values["sectioning"] = SWITCH_VALUES[values["sectioning"]]
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
        None, title="LLM model", description="Model that writes and grades answers; default PROPDEX_LLM_MODEL.",
        json_schema_extra=plain_input,
    )

    _blank_model = field_validator("llm_model", mode="before")(blank_is_none)

    def settings(self, db: str) -> Settings:
        return Settings(db=db, **({"llm_model": self.llm_model} if self.llm_model else {}))
