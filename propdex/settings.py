"""Every propdex setting, read from arguments or PROPDEX_* environment variables.

One class, so the CLI, the flows and the deployments agree on names and defaults.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from propdex.checks import CHECKS_VERSION, PROPOSITION_CHECKS_VERSION

# Bump when a change to extraction or chunk/header assembly changes stored outputs of every
# kind of document; a change to how PDFs are read alone bumps PDF_READER_VERSION instead.
# 2: PDF page furniture left out of the text, two-column pages in column order, legacy
# text encodings read instead of refused. 3: a Markdown table and its caption kept whole in a
# chunk, or split between rows with the caption and header rows in each part's header.
# 4: layout reader: pictures on pages with a text layer not OCRed, chunks of its
# one-line paragraphs filled with sentences. 5: layout reader: superscripts kept apart
# ("10^19", a footnote's "4 To illustrate"), formulas spaced as printed, OCR lines without
# a word left out of a page with a text layer. 6: chunks embedded without Markdown heading
# marks and block-quote marks. 7: offline rules: each Markdown table row a block of its own,
# and never the offline summary. 8: layout reader: a phrase the table grid cut at a column
# line one cell again, rotated pages and pages the engine finds no text on read in fast
# mode, boxes cut to the page; a table continued on the next page headed by its caption.
# 9: a PDF with under 20 characters of text that is no scan is indexed, not skipped; layout
# reader: a phrase the table grid cut read from the rectangle of the whole phrase, so that no
# piece of it is repeated or lost where a superscript lies across the cut. 10: layout reader:
# a table cell printed across rows given to each of them, a row the grid cut through a cell
# of several lines joined to the row above; a heading the engine took into a running
# header's box a Markdown heading; a page whose text runs sideways as shown (a landscape
# table, a wrong /Rotate) turned upright for the engine rather than read in fast mode, and
# boxes of rotated pages in the page's unrotated space. 11: layout reader: a borderless
# table's row that the engine cut after each line of a wrapped cell joined back.
PIPELINE_VERSION = "11"
# Bump when a change to reading the documents PyMuPDF reads (PDF, EPUB, XPS, MOBI, FB2: the
# layout engine, fast mode, OCR) changes their outputs. Only their fingerprint covers it, so
# text and Markdown files are not processed again for it: of the bumps of PIPELINE_VERSION
# up to 11, six (4, 5, 8, 9, 10, 11) changed PDF reading alone, and each re-processed every
# text file of every index too. It enters the fingerprint from 1 on: 0 leaves the
# fingerprints of indexes made before it as they were.
PDF_READER_VERSION = 1

LLMStep = Literal["context", "propositions", "grading"]
# Request kinds that carry an output cap (keys of ``llm_max_tokens``).
CAPPED_STEPS = ("title", "summary", "propositions", "grading", "sectioning", "llm_chunk",
                "eval_answer", "eval_grade")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROPDEX_", extra="ignore")

    # Storage
    db: str = Field("propdex-db", description="LanceDB folder (or URI) holding the index.")
    cache_dir: str | None = Field(
        None, description="Folder for the content-addressed LLM/embedding cache; default DB/_cache."
    )
    # S3-compatible object storage, used when db is an s3://bucket/path URI. Empty fields
    # leave LanceDB to its own defaults (AWS_* variables, instance credentials).
    storage_endpoint: str | None = Field(
        None, description="Object-store endpoint URL (MinIO, Ceph, R2...); empty = AWS S3."
    )
    storage_region: str | None = Field(None, description="Object-store region.")
    storage_access_key_id: str | None = Field(None, description="Object-store access key id.")
    storage_secret_access_key: SecretStr | None = Field(None, description="Object-store secret key.")
    storage_allow_http: bool = Field(False, description="Allow a plain-http endpoint.")

    # Scale-out: where a run's tasks execute
    dask_address: str | None = Field(
        None, description="Dask scheduler address (tcp://host:8786); 'local' starts a "
        "LocalCluster on this machine; empty = threads in the flow's process."
    )
    dask_workers: int = Field(2, ge=1, description="Worker processes of a local Dask cluster.")

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
    llm_unreachable_cooldown_s: float = Field(
        30.0, ge=0, description="Once a request's attempts all failed to connect to an LLM or "
        "embeddings server (refused, unknown host, connect timeout), its later requests fail "
        "at once for this many seconds, then one single-attempt request tries it again (s).",
    )
    retry_delay_scale: float = Field(
        1.0, ge=0, description="Factor on the waits before a failed pipeline task runs again "
        "(the delays declared on the tasks' decorators, e.g. 2 s then 10 s); 0 = at once.",
    )
    llm_concurrency: int = Field(8, ge=1, description="LLM requests in flight across the run.")
    llm_rpm: int = Field(0, ge=0, description="LLM requests per minute across the run; 0 = no limit.")
    llm_temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature of every LLM request.")
    llm_max_response_chars: int = Field(64_000, ge=1000, description="Largest accepted response.")
    llm_output_caps: bool = Field(
        True, description="Send every request an output cap (max_tokens) derived from what its "
        "step may return; off = generate up to the server's own limit.",
    )
    llm_max_tokens: dict[str, int] = Field(
        default_factory=dict,
        description='Output caps in tokens per step, overriding the derived ones (JSON, e.g. '
        '{"summary": 300}); 0 = no cap for that step. Steps: ' + ", ".join(CAPPED_STEPS) + ".",
    )
    llm_max_tokens_field: Literal["auto", "max_tokens", "max_completion_tokens"] = Field(
        "auto", description="Request field of the output cap; auto = max_completion_tokens for "
        "api.openai.com, else max_tokens, switched once if the server refuses it.",
    )

    llm_context_window: int | None = Field(
        None, ge=0, description="Tokens of the model's context window (prompt + answer); every "
        "output cap is bounded by what the prompt leaves of it. Empty = read from the server "
        "when it says (vLLM max_model_len, llama.cpp n_ctx); 0 = unknown, never read.",
    )

    # Context (title and summary)
    title_prefix_tokens: int = Field(
        4000, ge=100, description="Tokens (about 3 characters each) of the text's start the title is written from."
    )
    summary_prefix_tokens: int = Field(
        8000, ge=100, description="Tokens (about 3 characters each) of the text's start the summary is written from."
    )

    # Chunking
    chunker: Literal["fixed", "recursive", "passages", "semantic", "llm"] = Field(
        "recursive", description="How text is split into chunks (the docs' pipeline page compares them)."
    )
    chunk_size: int = Field(800, ge=50, description="Target chunk length in characters.")
    chunk_overlap: int = Field(0, ge=0, description="Characters shared with the previous chunk.")
    semantic_threshold: float = Field(
        0.25, ge=-1, le=1,
        description="semantic chunker: a new chunk starts where the cosine similarity of neighbouring sentences drops below this.",
    )
    llm_chunk_window: int = Field(
        4000, ge=500, description="llm chunker: characters the LLM copies per request."
    )
    llm_chunk_window_overlap: int = Field(
        400, ge=0, description="llm chunker: characters shared by neighbouring windows."
    )
    llm_chunk_logprobs: bool = Field(
        False, description="llm chunker: score the split marker from prompt log-probabilities (/v1/completions with echo) instead of generating a copy.",
    )
    sectioning: bool = Field(
        False, description="Semantic sectioning: the LLM divides each document into titled sections (offline: the outline and headings).",
    )

    # Propositions and grading
    min_propositions: int = Field(1, ge=0, description="Fewest propositions asked of a chunk.")
    max_propositions: int = Field(25, ge=1, description="Most propositions accepted from a chunk.")
    max_table_propositions: int = Field(
        60, ge=1, description="Most propositions accepted from a chunk holding a table: one per filled cell beside its row labels, up to this many (never fewer than max_propositions).",
    )
    max_proposition_chars: int = Field(600, ge=50, description="Longest proposition accepted, in characters.")
    threshold_accuracy: int = Field(7, ge=1, le=10, description="Accuracy grade a proposition needs to pass.")
    threshold_clarity: int = Field(7, ge=1, le=10, description="Clarity grade a proposition needs to pass.")
    threshold_completeness: int = Field(7, ge=1, le=10, description="Completeness grade a proposition needs to pass.")
    threshold_conciseness: int = Field(7, ge=1, le=10, description="Conciseness grade a proposition needs to pass.")

    # Embeddings
    embedder: Literal["minilm", "openai", "e5-small"] = Field(
        "minilm", description="minilm (local all-MiniLM-L6-v2), openai (an embeddings endpoint) "
        "or e5-small (local 4-bit multilingual-e5-small, the 'e5' extra)."
    )
    embed_model: str | None = Field(
        None, description="Embedding model; default all-MiniLM-L6-v2 (minilm) or text-embedding-3-small."
    )
    embed_base_url: str | None = Field(None, description="Embeddings server; default llm_base_url.")
    embed_api_key: SecretStr | None = Field(None, description="API key of the embeddings server; default llm_api_key.")
    embed_batch_size: int = Field(
        64, ge=1, description="Texts per request to an embeddings server (and per batch on torch)."
    )
    embed_runtime: Literal["onnx", "torch"] = Field(
        "onnx", description="minilm: ONNX Runtime (default; no torch at run time, long texts read "
        "in windows) or sentence-transformers on torch (the 'torch' extra; truncates at 256 "
        "word pieces)."
    )
    embed_precision: Literal["fp32", "int8"] = Field(
        "int8", description="minilm on onnx, documents: int8 weights (default; 1.8x "
        "fp32's throughput, recorded as all-MiniLM-L6-v2-int8) or fp32 (the model's own "
        "vectors). Queries are embedded in fp32 either way; the torch runtime runs fp32."
    )
    embed_threads: int = Field(
        0, ge=0, description="Threads of the local ONNX embedder (int8: texts embedded at "
        "once, one thread each; fp32: threads of each batch); 0 = every core this process may use."
    )
    onnx_dir: str | None = Field(
        None, description="Folder for MiniLM converted to ONNX (once, from the packaged weights); "
        "default $XDG_CACHE_HOME/propdex/onnx or ~/.cache/propdex/onnx."
    )

    # Inputs and limits
    pdf_password: SecretStr | None = Field(None, description="Password tried on encrypted PDFs.")
    pdf_reader: Literal["layout", "fast"] = Field(
        "layout", description="How PDFs are read: layout = PyMuPDF's layout engine (headings, "
        "lists, tables as Markdown, reading order, page regions of every chunk; about 0.3 s of "
        "CPU per page); fast = MuPDF's plain text lines, about a hundred times faster, no page "
        "regions. Changing it re-ingests the PDFs, EPUB, XPS, MOBI and FB2 files (part of their "
        "pipeline fingerprint), not text and Markdown files.",
    )
    max_file_mb: float = Field(200.0, gt=0, description="Largest file read, in MB; larger ones fail as too large.")
    max_pages: int = Field(5000, ge=1, description="Most pages a PDF may have; more fail as too large.")
    document_concurrency: int = Field(
        4, ge=1, description="Documents processed at once, at most (on threads or across a "
        "Dask cluster): the next starts when one has been through every stage.",
    )
    document_timeout_s: float = Field(
        3600.0, ge=0, description="Seconds a document may take from its first stage; 0 = no limit."
    )
    extract_memory_mb: int = Field(
        2048, ge=64, description="Memory (address space) a PDF's extraction process may add."
    )
    extract_workers: int = Field(
        0, ge=0, description="PDFs read at once, each in an extraction worker process whose "
        "layout engine runs on its share of the cores; 0 = one per core.",
    )
    # Security: every file read must resolve under one of these folders; empty = anywhere
    # (the CLI's default). Deployments set PROPDEX_ALLOWED_ROOTS in their job variables;
    # it is deliberately not an IngestOptions field, so a run form cannot widen it.
    allowed_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Folders runs may read under (JSON list or comma-separated)."
    )

    # Deployment runs: the index a run may write must resolve under one of these folders;
    # empty = the deployment's own default db. Not an IngestOptions field, like allowed_roots.
    allowed_db_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Folders (or URI prefixes) a deployment run's db must lie under (JSON list or comma-separated).",
    )

    # Query service (`propdex serve`, `propdex mcp`) and its clients
    server_url: str | None = Field(
        None, description="A running `propdex serve` (http://127.0.0.1:8765): `propdex search` asks it instead of opening the index.",
    )
    api_token: SecretStr | None = Field(
        None, description="Bearer token every request to `propdex serve` needs; required to bind a non-loopback address.",
    )
    serve_host: str = Field("127.0.0.1", description="Address `propdex serve` binds.")
    serve_port: int = Field(8765, ge=0, le=65535, description="Port `propdex serve` listens on.")
    ingest_nice: int = Field(
        0, ge=0, le=19, description="CPU niceness `propdex ingest` runs at (`--nice`), in a session of its own so that it also yields to processes of other sessions under autogroup scheduling: 19 keeps a `propdex serve` on the same machine responsive while the ingest takes the CPU left.",
    )
    serve_workers: int = Field(
        1, ge=1, le=64, description="Processes `propdex serve` answers with, on one port. Each has its own reader, embedder and GIL (its memory times the workers).",
    )
    api_cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Origins allowed cross-origin requests to `propdex serve` (JSON list or comma-separated); empty = no CORS.",
    )
    api_max_query_chars: int = Field(2000, ge=1, description="Longest query the service accepts.")
    api_max_body_bytes: int = Field(65536, ge=1024, description="Largest request body the service accepts.")

    @field_validator("allowed_roots", "allowed_db_roots", "api_cors_origins", mode="before")
    @classmethod
    def _roots_from_text(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("llm_max_tokens")
    @classmethod
    def _known_capped_steps(cls, caps: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(caps) - set(CAPPED_STEPS))
        if unknown:
            raise ValueError(f"llm_max_tokens: unknown steps {unknown} (known: {', '.join(CAPPED_STEPS)})")
        negative = sorted(step for step, cap in caps.items() if cap < 0)
        if negative:
            raise ValueError(f"llm_max_tokens: caps must be 0 (no cap) or more, not for {negative}")
        return caps

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap_below_size(cls, v: int, info) -> int:
        size = info.data.get("chunk_size", 800)
        if v >= size:
            raise ValueError(f"chunk_overlap ({v}) must be smaller than chunk_size ({size})")
        return v

    @field_validator("llm_chunk_window_overlap")
    @classmethod
    def _window_overlap_below_half(cls, v: int, info) -> int:
        window = info.data.get("llm_chunk_window", 4000)
        if v * 2 >= window:
            raise ValueError(f"llm_chunk_window_overlap ({v}) must be under half of llm_chunk_window ({window})")
        return v

    @model_validator(mode="after")
    def _int8_needs_onnx(self) -> Settings:
        # Only a precision asked for: the int8 default gives way to the torch runtime.
        asked = "embed_precision" in self.model_fields_set
        if asked and self.embed_precision == "int8" and self.embed_runtime != "onnx":
            raise ValueError("embed_precision 'int8' needs embed_runtime 'onnx'")
        return self

    @model_validator(mode="after")
    def _llm_chunker_needs_llm(self) -> Settings:
        if self.chunker == "llm" and self.llm_backend == "offline":
            raise ValueError(
                "chunker 'llm' needs an LLM: set PROPDEX_LLM_BASE_URL (or llm='openai'); "
                "the offline backend cannot copy text"
            )
        return self

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
        if self.embedder == "openai":
            return "text-embedding-3-small"
        if self.embedder == "e5-small":
            return "multilingual-e5-small-q4"
        return "all-MiniLM-L6-v2-int8" if self.minilm_precision == "int8" else "all-MiniLM-L6-v2"

    @property
    def minilm_precision(self) -> Literal["fp32", "int8"]:
        """The precision local MiniLM embeds documents in: int8 runs on ONNX Runtime only."""
        return self.embed_precision if self.embed_runtime == "onnx" else "fp32"

    @property
    def onnx_path(self) -> Path:
        """Folder of the converted ONNX models (see propdex/embed/onnx_export.py)."""
        if self.onnx_dir:
            return Path(self.onnx_dir).expanduser().resolve()
        from propdex.embed.onnx_export import default_onnx_dir

        return default_onnx_dir()

    @property
    def db_uri(self) -> str:
        """Absolute path for a local database (LanceDB needs one); URIs pass through."""
        if "://" in self.db:
            return self.db
        return str(Path(self.db).expanduser().resolve())

    @property
    def storage_options(self) -> dict[str, str] | None:
        """LanceDB ``storage_options`` for an object-store db; None when nothing is set."""
        secret = self.storage_secret_access_key
        options = {
            "endpoint": self.storage_endpoint,
            "region": self.storage_region,
            "aws_access_key_id": self.storage_access_key_id,
            "aws_secret_access_key": secret.get_secret_value() if secret else None,
            "allow_http": "true" if self.storage_allow_http else None,
        }
        options = {k: v for k, v in options.items() if v is not None}
        return options or None

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

    def fingerprint(self, prompt_versions: dict[str, str], *, pymupdf: bool = True) -> str:
        """Hash of every setting that changes stored outputs (issue: incremental re-ingest):
        of a document PyMuPDF reads (PDF, EPUB, XPS, MOBI, FB2), or with ``pymupdf`` off, of
        a text or Markdown file, which the PDF reader does not change."""
        return fingerprint_of(self.fingerprint_parts(prompt_versions, pymupdf=pymupdf))

    def fingerprint_parts(self, prompt_versions: dict[str, str], *, pymupdf: bool = True,
                          ) -> dict[str, object]:
        """What ``fingerprint`` hashes, part by part: documents keep it, so that a run can
        name what changed (propdex.pipeline.plan.what_changed)."""
        relevant: dict[str, object] = {
            "pipeline": PIPELINE_VERSION,
            "checks": CHECKS_VERSION,
            "proposition_checks": PROPOSITION_CHECKS_VERSION,
            "chunker": [self.chunker, self.chunk_size, self.chunk_overlap],
            "llm": self.llm_backend,
            "models": [self.model_for(s) for s in ("context", "propositions", "grading")],
            "prompts": prompt_versions,
            "props": [self.min_propositions, self.max_propositions, self.max_proposition_chars,
                      self.max_table_propositions],
            "thresholds": self.thresholds(),
            "prefix": [self.title_prefix_tokens, self.summary_prefix_tokens],
            "embed": [self.embedder, self.embed_model_name] + self._embed_reading(),
        }
        relevant.update(self._chunking_fingerprint())
        if pymupdf and self.pdf_reader != "fast":
            # Only beside fast mode: indexes read before the layout engine keep their fingerprint.
            relevant["pdf_reader"] = self.pdf_reader
        if pymupdf and PDF_READER_VERSION:
            relevant["pdf_reader_version"] = PDF_READER_VERSION
        return relevant

    def _embed_reading(self) -> list[str]:
        """How the local embedder reads long texts. The ONNX runtime reads them whole, in
        windows, which changes their vectors: indexes embedded with truncation re-embed (no LLM
        call); so does an index when the packaged weights, the int8 quantization recipe or
        the way int8 texts are run change. Empty for the torch runtime and endpoints, whose
        fingerprints stay as they were."""
        if self.embedder == "minilm" and self.embed_runtime == "onnx":
            from propdex.embed.minilm_weights import weights_tag
            from propdex.embed.onnx_export import INT8_RECIPE, INT8_RUNS

            reading = ["windows-256", f"weights-{weights_tag()}"]
            int8 = [f"int8-{INT8_RECIPE}", f"int8-runs-{INT8_RUNS}"]
            return reading + int8 if self.embed_precision == "int8" else reading
        return []

    def _chunking_fingerprint(self) -> dict[str, object]:
        """The settings of the chosen chunker and of sectioning; empty for the defaults, so
        indexes built before these settings existed keep their fingerprint."""
        from propdex.llm.prompts import load_prompt  # prompts import nothing from here

        extra: dict[str, object] = {}
        if self.chunker == "semantic":
            extra["semantic"] = [self.semantic_threshold, self.embedder, self.embed_model_name]
        if self.chunker == "llm":
            step = "llm_chunk_logprobs" if self.llm_chunk_logprobs else "llm_chunk"
            extra["llm_chunk"] = [self.llm_chunk_window, self.llm_chunk_window_overlap,
                                  load_prompt(step).version]
        if self.sectioning:
            extra["sectioning"] = load_prompt("sectioning").version if self.llm_backend == "openai" else "outline-v1"
        return extra


def fingerprint_of(parts: dict[str, object]) -> str:
    """The pipeline fingerprint of ``Settings.fingerprint_parts``."""
    blob = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
