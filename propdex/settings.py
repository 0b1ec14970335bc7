"""Every propdex setting, read from arguments or PROPDEX_* environment variables.

One class, so the CLI, the flows and the deployments agree on names and defaults.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Bump when a change to extraction or chunk/header assembly changes stored outputs.
PIPELINE_VERSION = "1"

LLMStep = Literal["context", "propositions", "grading"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROPDEX_", extra="ignore")

    # Storage
    db: str = Field("propdex-db", description="LanceDB folder (or URI) holding the index.")
    cache_dir: str | None = Field(
        None, description="Folder for the content-addressed LLM/embedding cache; default DB/_cache."
    )

    # LLM backend
    llm: Literal["offline", "openai"] | None = Field(
        None, description="LLM backend; default openai when llm_base_url is set, else offline."
    )
    llm_base_url: str | None = Field(None, description="Base URL of an OpenAI-compatible server.")
    llm_api_key: SecretStr | None = Field(None, description="API key for the LLM server.")
    llm_model: str = Field("gpt-4o-mini", description="Model for every LLM step.")
    llm_model_context: str | None = Field(None, description="Model for title/summary.")
    llm_model_propositions: str | None = Field(None, description="Model for propositions.")
    llm_model_grading: str | None = Field(None, description="Model for grading.")
    llm_json_schema: bool = Field(
        True, description="Ask for JSON-schema structured output; off = prompted JSON."
    )
    llm_timeout: float = Field(120.0, gt=0, description="Seconds per LLM request.")
    llm_max_attempts: int = Field(5, ge=1, description="Attempts per LLM request (retries + 1).")
    llm_backoff_max: float = Field(30.0, gt=0, description="Longest wait between attempts (s).")
    llm_concurrency: int = Field(8, ge=1, description="LLM requests in flight across the run.")
    llm_rpm: int = Field(0, ge=0, description="LLM requests per minute across the run; 0 = no limit.")
    llm_temperature: float = Field(0.0, ge=0, le=2)
    llm_max_response_chars: int = Field(64_000, ge=1000, description="Largest accepted response.")

    # Context (title and summary)
    title_prefix_tokens: int = Field(4000, ge=100)
    summary_prefix_tokens: int = Field(8000, ge=100)

    # Chunking
    chunker: Literal["recursive"] = "recursive"
    chunk_size: int = Field(800, ge=50, description="Target chunk length in characters.")
    chunk_overlap: int = Field(0, ge=0, description="Characters shared with the previous chunk.")

    # Propositions and grading
    min_propositions: int = Field(1, ge=0)
    max_propositions: int = Field(25, ge=1)
    max_proposition_chars: int = Field(600, ge=50)
    threshold_accuracy: int = Field(7, ge=1, le=10)
    threshold_clarity: int = Field(7, ge=1, le=10)
    threshold_completeness: int = Field(7, ge=1, le=10)
    threshold_conciseness: int = Field(7, ge=1, le=10)

    # Embeddings
    embedder: Literal["minilm", "openai"] = "minilm"
    embed_model: str | None = Field(
        None, description="Embedding model; default all-MiniLM-L6-v2 (minilm) or text-embedding-3-small."
    )
    embed_base_url: str | None = Field(None, description="Embeddings server; default llm_base_url.")
    embed_api_key: SecretStr | None = None
    embed_batch_size: int = Field(64, ge=1)

    # Inputs and limits
    pdf_password: SecretStr | None = None
    max_file_mb: float = Field(200.0, gt=0)
    max_pages: int = Field(5000, ge=1)
    document_concurrency: int = Field(4, ge=1, description="Documents processed at once.")

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap_below_size(cls, v: int, info) -> int:
        size = info.data.get("chunk_size", 800)
        if v >= size:
            raise ValueError(f"chunk_overlap ({v}) must be smaller than chunk_size ({size})")
        return v

    # Derived values -----------------------------------------------------------
    @property
    def llm_backend(self) -> Literal["offline", "openai"]:
        if self.llm:
            return self.llm
        return "openai" if self.llm_base_url else "offline"

    def model_for(self, step: LLMStep) -> str:
        """The model name recorded for a step ('offline' models are named by the backend)."""
        if self.llm_backend == "offline":
            return "offline-rules"
        override = {
            "context": self.llm_model_context,
            "propositions": self.llm_model_propositions,
            "grading": self.llm_model_grading,
        }[step]
        return override or self.llm_model

    @property
    def embed_model_name(self) -> str:
        if self.embed_model:
            return self.embed_model
        return "all-MiniLM-L6-v2" if self.embedder == "minilm" else "text-embedding-3-small"

    @property
    def db_uri(self) -> str:
        """Absolute path for a local database (LanceDB needs one); URIs pass through."""
        if "://" in self.db:
            return self.db
        return str(Path(self.db).expanduser().resolve())

    @property
    def cache_path(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir).expanduser().resolve()
        if "://" in self.db:
            return Path("~/.cache/propdex").expanduser().resolve()
        return Path(self.db_uri) / "_cache"

    def thresholds(self) -> dict[str, int]:
        return {
            "accuracy": self.threshold_accuracy,
            "clarity": self.threshold_clarity,
            "completeness": self.threshold_completeness,
            "conciseness": self.threshold_conciseness,
        }

    def fingerprint(self, prompt_versions: dict[str, str]) -> str:
        """Hash of every setting that changes stored outputs (issue: incremental re-ingest)."""
        relevant = {
            "pipeline": PIPELINE_VERSION,
            "chunker": [self.chunker, self.chunk_size, self.chunk_overlap],
            "llm": self.llm_backend,
            "models": [self.model_for(s) for s in ("context", "propositions", "grading")],
            "prompts": prompt_versions,
            "props": [self.min_propositions, self.max_propositions, self.max_proposition_chars],
            "thresholds": self.thresholds(),
            "prefix": [self.title_prefix_tokens, self.summary_prefix_tokens],
            "embed": [self.embedder, self.embed_model_name],
        }
        blob = json.dumps(relevant, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]
