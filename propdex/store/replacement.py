"""A document's atomic replacement, the three-step commit readers rely on: the new chunk and
proposition rows are appended under the new run_id, then the documents row is upserted with
that run_id (the commit point), then the rows of other runs are deleted. Also failures,
removals and the sweep of what a crashed run left."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from propdex.store import predicates as p
from propdex.store.maintenance import Maintenance
from propdex.store.schema import (
    CHUNKS,
    DOCUMENTS,
    DOCUMENTS_SCHEMA,
    META,
    PROPOSITIONS,
    VECTOR,
    schema_for,
    vector_dim,
)
from propdex.store.tables import utc_now

# Columns a failure changes on a document that already has a committed version: the
# attempt's outcome, and the content hash and fingerprint it saw (so change detection
# compares the next run with the last attempt, and an input failure on unchanged bytes is
# not retried forever). The rest of the row -- run_id, ingested_at, text, title, counts --
# keeps describing the committed version, which stays searchable.
FAILURE_COLUMNS = ("status", "error", "error_kind", "last_run_id", "last_attempt_at")
ATTEMPT_COLUMNS = ("content_sha256", "pipeline_version")  # changed only when given
_FAILURE_STATUSES = ("failed", "skipped")

_DELETE_BATCH = 500  # values per IN list when deleting many documents


@dataclass(frozen=True)
class Replacement:
    """A validated replacement of one document, ready for the three write steps."""

    doc_id: str
    run_id: str
    document: pa.Table
    chunks: pa.Table | None  # None when the document has no chunks
    propositions: pa.Table | None
    dim: int | None

    @property
    def chunk_ids(self) -> set[str]:
        return set(self.chunks.column("chunk_id").to_pylist()) if self.chunks else set()

    @property
    def prop_ids(self) -> set[str]:
        return set(self.propositions.column("prop_id").to_pylist()) if self.propositions else set()


class Replacements(Maintenance):
    """Writes of whole document versions, each atomic for readers."""

    # Replacement -----------------------------------------------------------------------
    def replace_document(self, doc_row: dict, chunk_rows: list[dict],
                         prop_rows: list[dict]) -> None:
        """Atomically replace one document's version: readers see either the old rows or
        the new ones, never a mix and never a half-written document."""
        replacement = self.prepare_replacement(doc_row, chunk_rows, prop_rows)
        with self._hold([replacement.doc_id]):
            if self._committed_run(replacement.doc_id) == replacement.run_id:
                self._finish_same_run(replacement)
                return
            self._discard_run(replacement.doc_id, replacement.run_id)
            self._append_rows(replacement)
            self._commit_document(replacement)
            self._delete_superseded(replacement.doc_id, replacement.run_id)
        self._compact_documents_when_fragmented()

    def prepare_replacement(self, doc_row: dict, chunk_rows: list[dict],
                            prop_rows: list[dict]) -> Replacement:
        """Validate and convert the rows (no I/O); ValueError names the first bad field."""
        return _prepare(doc_row, chunk_rows, prop_rows, self.dim)

    def _append_rows(self, replacement: Replacement) -> None:
        """Step 1: the new rows, invisible to readers until the documents row names their run."""
        dim = replacement.dim or self.dim
        for name, rows in ((CHUNKS, replacement.chunks), (PROPOSITIONS, replacement.propositions)):
            if rows is None:
                continue
            table = self._writable_table(name, dim)
            self._write(f"append {name} rows of {replacement.doc_id}", lambda table=table, rows=rows: table.add(rows))

    def _commit_document(self, replacement: Replacement) -> None:
        """Step 2, the commit point: the documents row names the new run."""
        table = self._writable_table(DOCUMENTS, None)
        self._write(f"commit document {replacement.doc_id}", lambda: (
            table.merge_insert("doc_id").when_matched_update_all()
            .when_not_matched_insert_all().execute(replacement.document)))

    def _delete_superseded(self, doc_id: str, run_id: str) -> int:
        """Step 3: rows of this document from any other run (the old version, leftovers)."""
        return self._delete_where(p.all_of(p.eq("doc_id", doc_id), p.not_eq("run_id", run_id)))

    def _discard_run(self, doc_id: str, run_id: str) -> int:
        """Rows an earlier, uncommitted attempt of this same run left (a retried task)."""
        return self._delete_where(p.all_of(p.eq("doc_id", doc_id), p.eq("run_id", run_id)))

    def _delete_where(self, where: str, tables: Sequence[str] = (CHUNKS, PROPOSITIONS)) -> int:
        removed = 0
        for name in tables:
            table = self.table(name)
            if table is None:
                continue
            count = self._count(table, where)
            if count:  # a delete matching nothing still writes a new table version
                self._write(f"delete rows from {name}", lambda table=table: table.delete(where))
                removed += count
        return removed

    def _finish_same_run(self, replacement: Replacement) -> None:
        """The run already committed this document (a retried task whose first attempt
        got past the commit): finish its clean-up, provided it is the same version."""
        doc_id = replacement.doc_id
        chunk_ids = {r["chunk_id"] for r in self.live_rows(CHUNKS, ["chunk_id"], doc_id)}
        prop_ids = {r["prop_id"] for r in self.live_rows(PROPOSITIONS, ["prop_id"], doc_id)}
        if (chunk_ids, prop_ids) != (replacement.chunk_ids, replacement.prop_ids):
            raise ValueError(
                f"run {replacement.run_id} already committed another version of {doc_id}; "
                "a replacement needs a new run_id"
            )
        self._commit_document(replacement)
        self._delete_superseded(doc_id, replacement.run_id)

    # Metadata ----------------------------------------------------------------------------
    def update_metadata(self, doc_id: str, metadata_json: str | None,
                        entries: list[str]) -> int:
        """Give a document new metadata: its documents row (``metadata``, ``meta``) and the
        ``meta`` of every chunk and proposition row of it, without touching their text or
        vectors. Returns the chunk and proposition rows updated."""
        # No entries: null, which no filter matches (Lance cannot update to an empty list).
        value = p.string_array(entries) if entries else "NULL"
        updated = 0
        with self._hold([doc_id]):
            for name in (CHUNKS, PROPOSITIONS):
                table = self.table(name)
                if table is None:
                    continue
                self._add_missing_columns(name, table)
                where = p.eq("doc_id", doc_id)
                count = self._count(table, where)
                if count:
                    self._write(f"update the metadata of {doc_id} in {name}",
                                lambda table=table, where=where: table.update(
                                    where=where, values_sql={META: value}))
                    updated += count
            # Last, as a replacement's commit: a crash before it leaves the old metadata on
            # the documents row, and the next run's plan updates the rows again.
            self._update_documents_rows(
                [{"doc_id": doc_id, "metadata": metadata_json, META: entries or None}],
                f"update the metadata of {doc_id}")
        self._compact_documents_when_fragmented()
        return updated

    def update_found_at(self, found_at: dict[str, list[str]]) -> None:
        """Set the ``found_at`` of documents rows (doc_id -> paths) in one write. A doc_id
        with no row (its first attempt crashed) is skipped: the next run's plan sets it."""
        if not found_at or self.table(DOCUMENTS) is None:
            return
        with self._hold(list(found_at)):
            self._update_documents_rows(
                [{"doc_id": doc_id, "found_at": paths} for doc_id, paths in found_at.items()],
                "record where documents were found")
        self._compact_documents_when_fragmented()

    def update_object_versions(self, versions: dict[str, tuple[str, int]]) -> None:
        """Set the ``object_etag`` and ``object_size`` of documents rows (doc_id -> (ETag,
        size)) in one write: objects re-uploaded with the same bytes, so that the next run
        compares them without downloading them again. A doc_id with no row is skipped."""
        if not versions or self.table(DOCUMENTS) is None:
            return
        with self._hold(list(versions)):
            self._update_documents_rows(
                [{"doc_id": doc_id, "object_etag": etag, "object_size": size}
                 for doc_id, (etag, size) in versions.items()],
                "record the versions of re-uploaded objects")
        self._compact_documents_when_fragmented()

    def _update_documents_rows(self, rows: list[dict], action: str) -> None:
        """Set the columns the ``rows`` give (doc_id plus any others, the same in each) on
        the documents rows of those doc_ids; every other column keeps its value, and a
        doc_id with no row is skipped. The caller holds the documents' locks."""
        documents = self._writable_table(DOCUMENTS, None)
        data = pa.Table.from_pylist(
            rows, schema=pa.schema([DOCUMENTS_SCHEMA.field(k) for k in rows[0]]))
        self._write(action, lambda: (
            documents.merge_insert("doc_id").when_matched_update_all().execute(data)))

    # Failures, pruning, sweeping -------------------------------------------------------
    def record_failure(self, doc_row: dict) -> None:
        """Store a failed or skipped attempt. A previously committed version keeps its
        run_id, ingested_at, text and counts (it stays searchable); only the attempt's
        status, error, last_run_id, last_attempt_at and, when given, content_sha256 and
        pipeline_version change. A document with no committed version gets the whole row,
        with run_id null."""
        row = _failure_row(doc_row)
        action = f"record the failure of {row['doc_id']}"
        with self._hold([row["doc_id"]]):
            if self._committed_run(row["doc_id"]) is not None:
                # Only the attempt's columns: the matched row keeps every column not given.
                columns = ("doc_id", *FAILURE_COLUMNS,
                           *(k for k in ATTEMPT_COLUMNS if row.get(k) is not None))
                self._update_documents_rows([{k: row[k] for k in columns}], action)
            else:
                table = self._writable_table(DOCUMENTS, None)
                data = _to_table([row], DOCUMENTS_SCHEMA)
                self._write(action, lambda: (
                    table.merge_insert("doc_id").when_matched_update_all()
                    .when_not_matched_insert_all().execute(data)))
        self._compact_documents_when_fragmented()

    def delete_documents(self, doc_ids: list[str]) -> None:
        """Remove documents and all their rows. The documents rows go first, so readers
        ignore the remaining chunk and proposition rows from that moment on."""
        ids = list(dict.fromkeys(doc_ids))
        if not ids or self.table(DOCUMENTS) is None:
            return
        with self._hold(ids):
            for start in range(0, len(ids), _DELETE_BATCH):
                where = p.in_list("doc_id", ids[start:start + _DELETE_BATCH])
                self._delete_where(where, (DOCUMENTS,))
                self._delete_where(where)

    def uncommitted_documents(self) -> set[str]:
        """doc_ids that have chunk or proposition rows of no committed (doc_id, run_id): what
        a crashed run appended but never committed, and what ``sweep_uncommitted`` removes."""
        stale = set()
        live = self.live_runs()
        for name in (CHUNKS, PROPOSITIONS):
            for row in self.read(name, ["doc_id", "run_id"]):
                if live.get(row["doc_id"]) != row["run_id"]:
                    stale.add(row["doc_id"])
        return stale

    def sweep_uncommitted(self) -> int:
        """Delete chunk and proposition rows that belong to no committed (doc_id, run_id):
        what a crashed run appended but never committed. Returns the rows removed."""
        stale = self.uncommitted_documents()
        if not stale:
            return 0
        with self._hold(stale):
            live = self.live_runs()  # again under the locks: a writer may have committed
            committed = sorted(d for d in stale if d in live)
            uncommitted = sorted(d for d in stale if d not in live)
            where = p.any_of(
                *(p.all_of(p.eq("doc_id", d), p.not_eq("run_id", live[d])) for d in committed),
                p.in_list("doc_id", uncommitted) if uncommitted else "",
            )
            return self._delete_where(where)


def _check_columns(row: dict, schema: pa.Schema, what: str) -> None:
    unknown = set(row) - set(schema.names)
    if unknown:
        raise ValueError(f"{what}: unknown column(s) {sorted(unknown)}")
    for field in schema:
        if not field.nullable and row.get(field.name) is None:
            raise ValueError(f"{what}: {field.name} is required")


def _to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows to Arrow; vectors are stacked into one float32 block instead of row by row."""
    if VECTOR not in schema.names:
        return pa.Table.from_pylist(rows, schema=schema)
    dim = vector_dim(schema)
    plain = pa.schema([f for f in schema if f.name != VECTOR])
    table = pa.Table.from_pylist([{k: v for k, v in r.items() if k != VECTOR} for r in rows],
                                 schema=plain)
    block = np.asarray([np.asarray(r[VECTOR], dtype=np.float32) for r in rows], dtype=np.float32)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), dim)
    return table.append_column(schema.field(VECTOR), vectors).select(schema.names)


def _vector_length(row: dict, what: str) -> int:
    vector = np.asarray(row[VECTOR])
    if vector.ndim != 1 or not np.all(np.isfinite(vector)):
        raise ValueError(f"{what}: vector must be one finite row of numbers")
    return int(vector.shape[0])


def _inherit(rows: list[dict], doc: dict, what: str, fields: Sequence[str],
             defaults: dict[str, Any]) -> list[dict]:
    """Copy lineage columns from the documents row; a conflicting value is a caller bug."""
    out = []
    for i, original in enumerate(rows):
        row = dict(original)
        for name in fields:
            if row.get(name) is None:
                row[name] = doc[name]
            elif row[name] != doc[name]:
                raise ValueError(f"{what} {i}: {name} {row[name]!r} differs from the document's")
        for name, value in defaults.items():
            if row.get(name) is None:
                row[name] = value
        out.append(row)
    return out


def _prepare(doc_row: dict, chunk_rows: list[dict], prop_rows: list[dict],
             dim: int | None) -> Replacement:
    doc = dict(doc_row)
    if isinstance(doc.get("prompt_versions"), dict):
        doc["prompt_versions"] = json.dumps(doc["prompt_versions"], sort_keys=True)
    run_id = doc.get("run_id")
    if not run_id:
        raise ValueError("replace_document needs the document row's run_id")
    if doc.get("status", "indexed") != "indexed":
        raise ValueError("replace_document commits an indexed version; use record_failure")
    now = utc_now()
    doc.setdefault("status", "indexed")
    for name, value in (("last_run_id", run_id), ("ingested_at", now), ("last_attempt_at", now)):
        if doc.get(name) is None:
            doc[name] = value
    for name in ("source", "content_sha256", "embed_model", "llm_model"):
        doc.setdefault(name, None)
    _check_columns(doc, DOCUMENTS_SCHEMA, "document row")

    doc.setdefault(META, None)
    chunks = _inherit(chunk_rows, doc, "chunk",
                      ("doc_id", "run_id", "source", "content_sha256", META),
                      {"embed_model": doc["embed_model"]})
    for i, c in enumerate(chunks):
        _check_columns(c, schema_for(CHUNKS, 1), f"chunk {i}")
    by_chunk = {}
    for c in chunks:
        if c.get("chunk_id") in by_chunk:
            raise ValueError(f"duplicate chunk_id {c.get('chunk_id')!r}")
        by_chunk[c.get("chunk_id")] = c
    props = _inherit(prop_rows, doc, "proposition",
                     ("doc_id", "run_id", "source", "content_sha256", META),
                     {"embed_model": doc["embed_model"], "llm_model": doc["llm_model"]})
    seen_props = set()
    for i, prop in enumerate(props):
        parent = by_chunk.get(prop.get("chunk_id"))
        if parent is not None:
            for name in ("page_start", "page_end"):
                if prop.get(name) is None:
                    prop[name] = parent[name]
        _check_columns(prop, schema_for(PROPOSITIONS, 1), f"proposition {i}")
        if parent is None:
            raise ValueError(
                f"proposition {i}: chunk {prop.get('chunk_id')!r} is not in chunk_rows")
        if prop.get("prop_id") in seen_props:
            raise ValueError(f"duplicate prop_id {prop.get('prop_id')!r}")
        seen_props.add(prop.get("prop_id"))

    counts = {
        "chunk_count": len(chunks),
        "proposition_count": len(props),
        "passed_count": sum(bool(x.get("passed")) for x in props),
    }
    for name, actual in counts.items():
        if doc.get(name) is None:
            doc[name] = actual
        elif doc[name] != actual:
            raise ValueError(f"document row: {name} is {doc[name]} but {actual} rows were given")
    if doc.get("chunk_failures") is None:
        doc["chunk_failures"] = sum(c.get("prop_error") is not None for c in chunks)

    lengths = {_vector_length(r, f"row {r.get('prop_id') or r.get('chunk_id')}")
               for r in (*chunks, *props) if VECTOR in r}
    if len(lengths) > 1 or (dim is not None and lengths and lengths != {dim}):
        raise ValueError(f"vectors of lengths {sorted(lengths)} given; the index expects {dim}")
    row_dim = next(iter(lengths), dim)

    return Replacement(
        doc_id=doc["doc_id"], run_id=run_id,
        document=_to_table([doc], DOCUMENTS_SCHEMA),
        chunks=_to_table(chunks, schema_for(CHUNKS, row_dim)) if chunks else None,
        propositions=_to_table(props, schema_for(PROPOSITIONS, row_dim)) if props else None,
        dim=row_dim,
    )


def _failure_row(doc_row: dict) -> dict:
    row = dict(doc_row)
    if row.get("status") not in _FAILURE_STATUSES:
        raise ValueError(f"record_failure: status must be one of {_FAILURE_STATUSES}")
    if isinstance(row.get("prompt_versions"), dict):
        row["prompt_versions"] = json.dumps(row["prompt_versions"], sort_keys=True)
    # A failure never commits a version: a new document has no live run.
    row["run_id"] = None
    row["ingested_at"] = None
    row.setdefault("error", None)
    row.setdefault("error_kind", None)
    row.setdefault("last_run_id", None)
    if row.get("last_attempt_at") is None:
        row["last_attempt_at"] = utc_now()
    _check_columns(row, DOCUMENTS_SCHEMA, "failure row")
    return row
