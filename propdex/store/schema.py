"""The three LanceDB tables: names, Arrow schemas and the keys that govern them.

Keys (declared as LanceDB "unenforced primary keys" in the field metadata, so they exist
from the table's first version on):

- documents.doc_id -- one row per source. The documents row is the commit point of a
  replacement (``merge_insert`` on doc_id); without the declared key, two concurrent
  merges inserting the same new doc_id both succeed and leave duplicate rows.
- chunks.chunk_id and propositions.prop_id -- unique among *live* rows. Their ids are
  derived from the document and offsets, so while a document is being replaced the new
  version's rows sit next to the old ones under the same ids with another run_id. Which
  rows are live is decided by the documents row: a chunk or proposition row is live only
  when its (doc_id, run_id) equals the documents row's (doc_id, run_id). That is why
  chunks and propositions are only ever appended and deleted, never merge_inserted.
"""

from __future__ import annotations

import pyarrow as pa

DOCUMENTS = "documents"
CHUNKS = "chunks"
PROPOSITIONS = "propositions"
TABLES = (DOCUMENTS, CHUNKS, PROPOSITIONS)

PRIMARY_KEYS = {DOCUMENTS: "doc_id", CHUNKS: "chunk_id", PROPOSITIONS: "prop_id"}

DOCUMENT_STATUSES = ("indexed", "failed", "skipped")
VECTOR = "vector"
FTS_COLUMN = "text"

_PK_METADATA = {b"lance-schema:unenforced-primary-key": b"true"}


def _key(name: str) -> pa.Field:
    return pa.field(name, pa.string(), nullable=False, metadata=_PK_METADATA)


def _required(name: str, type_: pa.DataType = pa.string()) -> pa.Field:
    return pa.field(name, type_, nullable=False)


def _vector(dim: int) -> pa.Field:
    if dim < 1:
        raise ValueError(f"vector dimension must be positive, got {dim}")
    return pa.field(VECTOR, pa.list_(pa.float32(), dim), nullable=False)


TIMESTAMP = pa.timestamp("us", tz="UTC")

# The document's metadata as sorted "key=value" entries, on every table: a filter on the
# chunks and propositions is then a prefilter over their label-list index (null: none).
META = "meta"
META_FIELD = pa.field(META, pa.list_(pa.string()))
# A page rectangle in PDF points (origin top left, y downwards), page numbers 1-based.
PAGE_BOX = pa.struct([
    pa.field("page", pa.int32()), pa.field("x0", pa.float32()), pa.field("y0", pa.float32()),
    pa.field("x1", pa.float32()), pa.field("y1", pa.float32()),
])

DOCUMENTS_SCHEMA = pa.schema([
    _key("doc_id"),
    _required("source"),
    # Of the bytes last attempted: the live version's, unless a later attempt failed.
    pa.field("content_sha256", pa.string()),
    pa.field("kind", pa.string()),
    # Large: the full extracted text of every document would overflow 32-bit offsets.
    pa.field("text", pa.large_string()),
    pa.field("title", pa.string()),
    pa.field("summary", pa.string()),
    pa.field("page_count", pa.int32()),
    _required("status"),
    pa.field("error", pa.string()),
    # input | metadata | llm | configuration | timeout | storage | internal: an "input"
    # failure of unchanged bytes is not retried by the next run; any other kind is.
    pa.field("error_kind", pa.string()),
    pa.field("chunk_count", pa.int32()),
    pa.field("proposition_count", pa.int32()),
    pa.field("passed_count", pa.int32()),
    pa.field("chunk_failures", pa.int32()),
    pa.field("llm_model", pa.string()),
    pa.field("embed_model", pa.string()),
    pa.field("prompt_versions", pa.string()),  # JSON object: step -> version
    pa.field("pipeline_version", pa.string()),  # settings fingerprint, as content_sha256
    pa.field("run_id", pa.string()),  # run whose chunk/proposition rows are live; null = none
    pa.field("last_run_id", pa.string()),  # run that last touched this row
    pa.field("ingested_at", TIMESTAMP),  # when the live version was committed
    pa.field("last_attempt_at", TIMESTAMP),
    pa.field("llm_calls", pa.int64()),
    pa.field("prompt_tokens", pa.int64()),
    pa.field("completion_tokens", pa.int64()),
    pa.field("ocr", pa.bool_()),
    # Columns added after the first release (an older index gets them, null, on its next
    # write; see Index._add_missing_columns). Keep new fields nullable and at the end.
    pa.field("encoding", pa.string()),  # text files: the detected encoding ("utf-8", "cp1252")
    pa.field("furniture_removed", pa.int32()),  # PDF running headers/footers/page numbers dropped
    pa.field("context_fallback", pa.string()),  # title/summary written by the offline fallback
    pa.field("embed_truncated", pa.int32()),  # texts the embedder could not read whole
    pa.field("ungraded_count", pa.int32()),  # propositions whose grading failed (not searchable)
    pa.field("metadata", pa.string()),  # JSON object: the document's metadata (propdex.metadata)
    META_FIELD,
    # Object-store sources (propdex.remote): the object's ETag and size when last indexed;
    # a re-run that lists the same pair downloads nothing.
    pa.field("object_etag", pa.string()),
    pa.field("object_size", pa.int64()),
    pa.field("pdf_reader", pa.string()),  # PDFs: "layout" (layout engine) or "fast" (text lines)
    # PDFs read with the layout engine: pages it failed on, read in fast mode instead
    pa.field("layout_fallback_pages", pa.list_(pa.int32())),
    # JSON object: "step: reason" -> answers the deterministic checks rejected ("{}": none)
    pa.field("checks_rejected", pa.string()),
    # Paths the source was found at, links below the argument not resolved (pruning)
    pa.field("found_at", pa.list_(pa.string())),
    # JSON object: what pipeline_version hashes, part by part (Settings.fingerprint_parts),
    # so that a run can name what changed; null in rows written before it or for failures
    pa.field("pipeline_parts", pa.string()),
])


def chunks_schema(dim: int) -> pa.Schema:
    return pa.schema([
        _key("chunk_id"),
        _required("doc_id"),
        _required("ordinal", pa.int32()),
        _required("text"),
        pa.field("header", pa.string()),
        pa.field("section", pa.string()),
        _required("page_start", pa.int32()),
        _required("page_end", pa.int32()),
        _required("char_start", pa.int64()),
        _required("char_end", pa.int64()),
        _required("source"),
        pa.field("content_sha256", pa.string()),
        pa.field("embed_model", pa.string()),
        pa.field("prop_error", pa.string()),  # why proposition extraction failed for this chunk
        _required("run_id"),
        _vector(dim),
        META_FIELD,
        # Added later (nullable, at the end): page rectangles the text came from; null for
        # non-PDF sources and PDFs read in fast mode.
        pa.field("boxes", pa.list_(PAGE_BOX)),
    ])


def propositions_schema(dim: int) -> pa.Schema:
    return pa.schema([
        _key("prop_id"),
        _required("chunk_id"),
        _required("doc_id"),
        _required("ordinal", pa.int32()),
        _required("text"),
        pa.field("accuracy", pa.int8()),
        pa.field("clarity", pa.int8()),
        pa.field("completeness", pa.int8()),
        pa.field("conciseness", pa.int8()),
        _required("passed", pa.bool_()),
        _required("page_start", pa.int32()),  # of the parent chunk
        _required("page_end", pa.int32()),
        _required("source"),
        pa.field("content_sha256", pa.string()),
        pa.field("llm_model", pa.string()),
        pa.field("prompt_version", pa.string()),
        pa.field("embed_model", pa.string()),
        _required("run_id"),
        _vector(dim),
        META_FIELD,
        # Added later (nullable, at the end): page rectangles of what it came from (its chunk).
        pa.field("boxes", pa.list_(PAGE_BOX)),
        # Added after the first release (nullable, at the end; see DOCUMENTS_SCHEMA).
        pa.field("reject_reason", pa.string()),  # why it did not pass; null when it passed
    ])


def schema_for(table: str, dim: int) -> pa.Schema:
    if table == DOCUMENTS:
        return DOCUMENTS_SCHEMA
    if table == CHUNKS:
        return chunks_schema(dim)
    if table == PROPOSITIONS:
        return propositions_schema(dim)
    raise ValueError(f"unknown table {table!r}")


def vector_dim(schema: pa.Schema) -> int:
    """The fixed vector length of a chunks or propositions schema."""
    return schema.field(VECTOR).type.list_size
