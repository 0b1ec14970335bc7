"""The LanceDB index: documents, chunks and propositions, replaced one document at a time.

A document's replacement is atomic for readers (``replace_document``): the new chunk and
proposition rows are appended under the new run_id, then the documents row is upserted
with that run_id (the commit point), then the rows of other runs are deleted. Every read
path accepts a chunk or proposition row only when its (doc_id, run_id) is the one the
documents row names, so a reader sees the old version until the commit and the new one
after it, and a crash between steps leaves the old version searchable.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from propdex.errors import PropdexError, StorageError
from propdex.store import predicates as p
from propdex.store.consistency import find_problems
from propdex.store.datasets import lance_reason, select_stored
from propdex.store.live import LIVE_COLUMNS, LiveDocuments, LiveDocumentsCache
from propdex.store.locks import WriterLocks
from propdex.store.schema import (
    CHUNKS,
    DOCUMENTS,
    DOCUMENTS_SCHEMA,
    FTS_COLUMN,
    PROPOSITIONS,
    VECTOR,
    schema_for,
    vector_dim,
)

# Below this many rows a table is searched exactly (flat); from it on optimize() builds an
# IVF_FLAT index. Measured by bench/bench_search.py (384-d MiniLM-clustered vectors, k=10,
# 2 cores; bench/RESULTS.md): at 1M rows IVF_FLAT answers in 8 ms p50 at recall@10 0.991
# (LanceDB flat: 1964 ms), against IVF_HNSW_SQ's 96 s build for 0.965 at 100k. IVF_FLAT's
# distances are exact, so no refine step. The threshold is low because a flat LanceDB search
# reads every vector of the table on each query: 9.5 ms for the 10k chunks of a
# 100k-proposition index against 5.6 ms with the index (bench/bench_serve.py), and the
# default search runs a vector search on each table.
VECTOR_INDEX_THRESHOLD = 5_000
# Rows per partition when the index is trained. Not sqrt(rows), as before: LanceDB's
# optimize() (run after every ingest that wrote) re-partitions an index whose partitions are
# small, and the index it writes then is searched through every partition. Measured on a
# 100k-proposition index (2-core AVX2 EPYC, 60 held-out questions, bench/RESULTS.md): 316
# partitions of 316 rows searched with 40 probes took 10.6 ms warm and 55 ms in a new
# process; after one replaced document and optimize() 22-26 ms and 310-400 ms whatever the
# probes (recall 1.000: every row scanned), and that optimize() took 3.7 s rewriting the
# whole index. 128 partitions (781 rows) were re-partitioned the same way; 64 (1,562 rows)
# were kept through six rounds of replacements, each optimize() taking 0.4-0.6 s.
VECTOR_INDEX_ROWS_PER_PARTITION = 2_048
# Probes: enough partitions to hold this many rows, or this share of the rows trained on.
# Propositions' vector search, 60 held-out questions, recall@10 against exact search: at
# 100k, 10 of 48 partitions 0.987 in 13 ms warm (14 or 20 probes no better); at 1M, 20 of 488
# 0.883, 40 0.967, 49 (this share) 0.983 in 28-35 ms, 60 1.000 in 36 ms.
VECTOR_INDEX_SCAN_ROWS = 20_000
VECTOR_INDEX_SCAN_SHARE = 0.1
VECTOR_INDEX_NPROBES = 40  # an index of an older propdex (named without its partitions)
# optimize() only appends new rows to the trained partitions, so they grow with the table;
# once it holds this many times the rows the index was trained on, the index is re-trained.
VECTOR_INDEX_RETRAIN_GROWTH = 4
VECTOR_INDEX_NAME = re.compile(r"vector_ivf_flat_(\d+)_p(\d+)")
# Scalar indexes optimize() keeps, for the filters every search runs (measured at 1M
# propositions and 100k chunks, bench/bench_serve.py): the prefilter ``passed = true`` costs
# 139 ms per vector search without a bitmap index and nothing with it (24 ms either way
# otherwise); each proposition hit fetches its parent chunk by id, a scan of the chunks
# table without the B-tree. doc_id: a resident index (propdex serve) reads the rows of each
# newly committed run by doc_id, and a replacement deletes the old rows by it; at 100k
# propositions, after 30 commits, reading one document's rows took 28 ms of CPU from the
# propositions table and 20 from the chunks table with a scan, 10 and 10 with the B-tree.
_SCALAR_INDEXES: dict[str, dict[str, str]] = {  # column -> lancedb.index class
    CHUNKS: {"chunk_id": "BTree", "doc_id": "BTree"},
    PROPOSITIONS: {"passed": "Bitmap", "doc_id": "BTree"},
}

# Every commit writes its documents row anew (merge_insert: a fragment holding the new row,
# the old one marked deleted), and every reader of the live documents -- each search of the
# CLI, each refresh of `propdex serve` -- reads the whole table after a commit. At 1,000
# documents that read took 7 ms of CPU in one fragment, 16 ms in 9 and 33 ms in 31 (the
# 100k-proposition bench index beside a writer), so a writer compacts the table once it has
# this many fragments (34 ms at 1,000 rows), instead of leaving it to the optimize() at the
# end of an ingest run.
DOCUMENTS_COMPACTION_FRAGMENTS = 16

# Columns a failure changes on a document that already has a committed version: the
# attempt's outcome, and the content hash and fingerprint it saw (so change detection
# compares the next run with the last attempt, and an input failure on unchanged bytes is
# not retried forever). The rest of the row -- run_id, ingested_at, text, title, counts --
# keeps describing the committed version, which stays searchable.
FAILURE_COLUMNS = ("status", "error", "error_kind", "last_run_id", "last_attempt_at")
ATTEMPT_COLUMNS = ("content_sha256", "pipeline_version")  # changed only when given
_FAILURE_STATUSES = ("failed", "skipped")

_DELETE_BATCH = 500  # values per IN list when deleting many documents
T = TypeVar("T")

if TYPE_CHECKING:
    from propdex.store.ranking import LanceRankings


def utc_now() -> datetime:
    return datetime.now(UTC)


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


class Index:
    """One LanceDB database. Thread-safe; open one per task or share one."""

    def __init__(self, uri: str, dim: int | None = None, *, create: bool = True,
                 vector_index_threshold: int = VECTOR_INDEX_THRESHOLD,
                 storage_options: dict[str, str] | None = None, exact_search: bool = False):
        self.uri = _absolute(uri)
        # Exact (flat) vector search even where a vector index exists: the reference that
        # the approximate search's recall is measured against (bench/bench_serve.py).
        self.exact_search = exact_search
        self.storage_options = storage_options  # object-store endpoint and credentials
        self.dim = dim
        self.create = create
        self.vector_index_threshold = vector_index_threshold
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._fts_checked: set[str] = set()
        self._migrated: set[str] = set()
        # Per table, its column names as searches last looked them up (one round trip).
        self._stored_names: dict[str, set[str]] = {}
        self._guard = threading.RLock()
        local = _is_local(self.uri)
        self._locks = WriterLocks(self.uri, Path(self.uri) / "_locks" if local else None)
        self._live = LiveDocumentsCache(lambda: self.version(DOCUMENTS),
                                        lambda _version: self.read(DOCUMENTS, LIVE_COLUMNS))

    @classmethod
    def open(cls, uri: str, dim: int | None = None, *, create: bool = True,
             vector_index_threshold: int = VECTOR_INDEX_THRESHOLD,
             storage_options: dict[str, str] | None = None, exact_search: bool = False) -> Index:
        """Open the index at ``uri`` (a folder or an object-store URI). Nothing is created
        until the first write; with ``create=False`` a write that would need to create the
        database or a table raises StorageError instead."""
        return cls(uri, dim, create=create, vector_index_threshold=vector_index_threshold,
                   storage_options=storage_options, exact_search=exact_search)

    # Connection and tables -----------------------------------------------------------
    @contextmanager
    def _storage(self, action: str) -> Iterator[None]:
        """Turn LanceDB and OS failures into StorageError naming the database."""
        try:
            yield
        except PropdexError:
            raise
        except Exception as exc:  # lance raises RuntimeError, OSError, ValueError, ...
            reason = lance_reason(exc)
            raise StorageError(f"cannot {action} in the index at {self.uri}: {reason}") from exc

    def _connect(self, *, for_write: bool) -> Any:
        with self._guard:
            if self._db is not None:
                return self._db
            if _is_local(self.uri) and not Path(self.uri).is_dir():
                if not for_write:
                    return None  # reading a database that does not exist: nothing to read
                if not self.create:
                    raise StorageError(f"no index at {self.uri}")
            import lancedb  # here: a one-shot search reads through pylance only (cli.py)

            with self._storage("open the database"):
                # interval 0: every read sees the latest committed version, also the ones
                # written by another process (a running ingest while `status` reads).
                self._db = lancedb.connect(self.uri, read_consistency_interval=timedelta(0),
                                           storage_options=self.storage_options)
            return self._db

    def table(self, name: str) -> Any:
        """The opened LanceDB table, or None when the database or the table does not exist."""
        with self._guard:
            if name in self._tables:
                return self._tables[name]
            db = self._connect(for_write=False)
            if db is None:
                return None
            with self._storage(f"open table {name}"):
                if name not in db.list_tables().tables:
                    return None
                try:
                    table = db.open_table(name)
                except ValueError:
                    # Listed but not committed yet: another writer is creating it.
                    return None
            self._tables[name] = table
            return table

    def _writable_table(self, name: str, dim: int | None) -> Any:
        """The table, created (with its full-text index) when it does not exist yet."""
        table = self.table(name)
        if table is not None:
            self._add_missing_columns(name, table)
        if table is not None and (name == DOCUMENTS or name in self._fts_checked):
            self._check_dim(name, table, dim)
            return table
        if table is None and not self.create:
            raise StorageError(f"the index at {self.uri} has no {name} table")
        db = self._connect(for_write=True)
        with self._hold_tables():
            table = self.table(name)  # again: another writer may have created it meanwhile
            if table is None:
                if name != DOCUMENTS and dim is None:
                    raise StorageError(
                        f"cannot create the {name} table in {self.uri}: vector dimension unknown"
                    )
                table = self._write(f"create table {name}", lambda: db.create_table(
                    name, schema=schema_for(name, dim or 0), exist_ok=True))
                with self._guard:
                    self._tables[name] = table
            self._check_dim(name, table, dim)
            if name != DOCUMENTS:
                self._ensure_fts(table, name)
        return table

    def _add_missing_columns(self, name: str, table: Any) -> None:
        """Add the columns a newer propdex declares to a table an older one created (all
        nullable, so old rows read as null): an index is upgraded in place, never rebuilt."""
        if name in self._migrated:
            return
        wanted = schema_for(name, vector_dim(table.schema) if name != DOCUMENTS else 0)
        missing = [f for f in wanted if f.name not in table.schema.names]
        if missing:
            with self._hold_tables():
                table.checkout_latest()
                missing = [f for f in missing if f.name not in table.schema.names]
                if missing:
                    self._write(f"add columns to {name}",
                                lambda: table.add_columns(pa.schema(missing)))
                    self._stored_names.pop(name, None)
        self._migrated.add(name)

    def _write(self, action: str, operation: Callable[[], T]) -> T:
        """Run one LanceDB write; a commit that lost a race with another writer did not
        happen, so it is retried (compaction against a concurrent delete, for example)."""
        with self._storage(action):
            for attempt in Retrying(retry=retry_if_exception(_is_commit_conflict),
                                    stop=stop_after_attempt(6), reraise=True,
                                    wait=wait_random_exponential(multiplier=0.05, max=2)):
                with attempt:
                    return operation()
        raise AssertionError("unreachable: Retrying re-raises the last error")

    @contextmanager
    def _locked(self, lock: Any) -> Iterator[None]:
        """Hold a writer lock (the database folder, where lock files live, must exist)."""
        self._connect(for_write=True)
        with ExitStack() as stack:
            with self._storage("take a writer lock"):
                stack.enter_context(lock)
            yield

    def _hold(self, doc_ids: Sequence[str] | set[str]) -> Any:
        """The writer locks of these documents."""
        return self._locked(self._locks.documents(doc_ids))

    def _hold_tables(self) -> Any:
        """The lock for creating tables and indexes (LanceDB does not retry those)."""
        return self._locked(self._locks.tables())

    def _check_dim(self, name: str, table: Any, dim: int | None) -> None:
        if name == DOCUMENTS:
            return
        stored = vector_dim(table.schema)
        if dim is not None and dim != stored:
            raise StorageError(
                f"the {name} table in {self.uri} holds {stored}-dimensional vectors but this "
                f"embedder gives {dim}; use another --db or re-create the index"
            )

    def _ensure_fts(self, table: Any, name: str) -> None:
        # The index is created with the (empty) table; checked again in case a process
        # died between creating the table and its index. LanceDB searches rows not yet in
        # the index by brute force, so new rows are found before optimize() indexes them.
        with self._storage(f"list the indexes of {name}"):
            missing = not any(i.index_type == "FTS" for i in table.list_indices())
        if missing:
            from lancedb.index import FTS

            self._write(f"create the full-text index of {name}",
                        lambda: table.create_index(FTS_COLUMN, config=FTS(), replace=True))
        self._fts_checked.add(name)

    def read(self, name: str, columns: Sequence[str], where: str | None = None) -> list[dict]:
        """Rows of a table (every row, also uncommitted ones) with the given columns."""
        return self.read_arrow(name, columns, where).to_pylist()

    def read_arrow(self, name: str, columns: Sequence[str], where: str | None = None,
                   ) -> pa.Table:
        """``read`` as an Arrow table (no table yet: zero rows, every column null-typed)."""
        batches = list(self.read_batches(name, columns, where))
        if not batches:
            return pa.table({c: pa.nulls(0) for c in columns})
        return pa.Table.from_batches(batches)

    def read_batches(self, name: str, columns: Sequence[str], where: str | None = None,
                     *, version: int | None = None) -> Iterator[pa.RecordBatch]:
        """``read`` as a stream of Arrow record batches, so that a reader of a large table
        holds one batch at a time rather than the whole table twice; ``version``: the table
        as of that version (see ``row_versions``) rather than the latest."""
        table = self.table(name)
        if table is None:
            return
        if version is not None:
            with self._storage(f"open version {version} of {name}"):
                table = self._connect(for_write=False).open_table(name, version=version)
        # An index written by an older propdex may lack newer columns: they read as null.
        stored = set(table.schema.names)  # one schema lookup: each is a round trip to Lance
        present = [c for c in columns if c in stored]
        with self._storage(f"read {name}"):
            query = table.search().select(present)
            if where:
                query = query.where(where)
            reader = query.to_batches()
            for batch in reader:
                for column in columns:
                    if column not in stored:
                        batch = batch.append_column(column, pa.nulls(len(batch)))
                yield batch.select(list(columns))

    def count(self, name: str, where: str | None = None) -> int:
        """Rows of a table (also uncommitted ones) matching ``where``; 0 without the table."""
        table = self.table(name)
        return 0 if table is None else self._count(table, where)

    def vector_search(self, name: str, vector: np.ndarray, *, limit: int,
                      columns: Sequence[str], where: str | None = None) -> list[dict]:
        """Rows nearest to ``vector`` by cosine distance (``_distance`` = 1 - cosine
        similarity), best first. Exact (flat) unless optimize() built a vector index."""
        table = self.table(name)
        if table is None:
            return []
        query_vector = np.asarray(vector, dtype=np.float32)
        stored = vector_dim(table.schema)
        if query_vector.shape != (stored,):
            raise ValueError(f"query vector has shape {query_vector.shape}; {name} holds "
                             f"{stored}-dimensional vectors")
        with self._storage(f"search {name}"):
            query = table.search(query_vector, vector_column_name=VECTOR).distance_type("cosine")
            if self.exact_search:
                query = query.bypass_vector_index()
            elif (probes := _vector_index_probes(table)) is not None:
                query = query.nprobes(probes)
            if where:
                query = query.where(where, prefilter=True)
            return self._selected(name, table, query, columns, "_distance", limit)

    def text_search(self, name: str, text: str, *, limit: int, columns: Sequence[str],
                    where: str | None = None) -> list[dict]:
        """Rows matching ``text`` in the full-text index, best BM25 ``_score`` first.
        The text is a plain match query: quotes or operators in it are not query syntax."""
        table = self.table(name)
        if table is None or not text.strip():
            return []
        from lancedb.query import MatchQuery

        with self._storage(f"full-text search {name}"):
            query = table.search(MatchQuery(text, FTS_COLUMN), query_type="fts")
            if where:
                query = query.where(where, prefilter=True)
            return self._selected(name, table, query, columns, "_score", limit)

    def _selected(self, name: str, table: Any, query: Any, columns: Sequence[str], score: str,
                  limit: int) -> list[dict]:
        """The query's rows with ``columns`` and ``score``; a column an index written by an
        older propdex lacks reads as null (as in read_batches)."""
        stored = self._stored_names.get(name)
        if stored is None:
            stored = self._stored_names[name] = set(table.schema.names)
        return select_stored(stored, columns, lambda present: query.select(
            [*present, score]).limit(limit).to_arrow().to_pylist())

    def _count(self, table: Any, where: str | None) -> int:
        with self._storage("count rows"):
            return table.count_rows(where)

    # Reads -----------------------------------------------------------------------------
    def documents(self, with_text: bool = False) -> list[dict]:
        """Every documents row, by source (the large ``text`` column only when asked for)."""
        names = [f.name for f in DOCUMENTS_SCHEMA if with_text or f.name != "text"]
        return sorted(self.read(DOCUMENTS, names), key=lambda r: (r["source"], r["doc_id"]))

    def document(self, doc_id: str, with_text: bool = True) -> dict | None:
        names = [f.name for f in DOCUMENTS_SCHEMA if with_text or f.name != "text"]
        rows = self.read(DOCUMENTS, names, p.eq("doc_id", doc_id))
        return rows[0] if rows else None

    def rankings(self) -> LanceRankings:
        """What propdex.search ranks with: LanceDB queries on this index at each call."""
        from propdex.store.ranking import LanceRankings  # it imports this module

        return LanceRankings(self)

    def versions_folder(self, name: str) -> Path | None:
        """The folder where LanceDB writes table ``name``'s version manifests, for an index
        in a local folder (None in an object store); see propdex.store.version_watch."""
        return Path(self.uri) / f"{name}.lance" / "_versions" if _is_local(self.uri) else None

    def live_documents(self) -> LiveDocuments:
        """The documents with a searchable version (run_id, title, source), as of the
        documents table's latest version; re-read only when that version changed."""
        return self._live.get()

    def row_versions(self, snapshot: LiveDocuments) -> dict[str, int | None] | None:
        """The versions of the chunks and propositions tables (None: no table) that hold
        every live row of ``snapshot``, or None when a commit landed after it.

        Why: a replacement deletes the rows it supersedes right after its commit, so rows of
        a snapshot's live runs read at the latest version may be gone already -- a chunk
        deleted before it was read, its propositions not yet -- and a reader holding rows
        would hold a half-deleted document. The rows of a live run were appended before its
        commit and are deleted only after a later one; versions read while no commit landed
        since the snapshot therefore hold them all, and reading at those versions
        (``read_batches(version=...)``) gets them whatever is deleted meanwhile."""
        versions = {name: self.version(name) for name in (CHUNKS, PROPOSITIONS)}
        return versions if self.version(DOCUMENTS) == snapshot.version else None

    def version(self, name: str) -> int | None:
        """Table ``name``'s latest version (None: no table). With read_consistency_interval
        0, LanceDB looks up the latest commit's."""
        table = self.table(name)
        return table.version if table is not None else None

    def live_runs(self) -> dict[str, str]:
        """doc_id -> committed run_id for every document that has a searchable version."""
        return dict(self.live_documents().runs)

    def _committed_run(self, doc_id: str) -> str | None:
        rows = self.read(DOCUMENTS, ["run_id"], p.eq("doc_id", doc_id))
        return rows[0]["run_id"] if rows else None

    def live_rows(self, name: str, columns: Sequence[str], doc_id: str) -> list[dict]:
        """The live chunk or proposition rows of one document."""
        run_id = self._committed_run(doc_id)
        if run_id is None:
            return []
        return self.read(name, columns, p.all_of(p.eq("doc_id", doc_id), p.eq("run_id", run_id)))

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

    # Failures, pruning, sweeping -------------------------------------------------------
    def record_failure(self, doc_row: dict) -> None:
        """Store a failed or skipped attempt. A previously committed version keeps its
        run_id, ingested_at, text and counts (it stays searchable); only the attempt's
        status, error, last_run_id, last_attempt_at and, when given, content_sha256 and
        pipeline_version change. A document with no committed version gets the whole row,
        with run_id null."""
        row = _failure_row(doc_row)
        table = self._writable_table(DOCUMENTS, None)
        with self._hold([row["doc_id"]]):
            if self._committed_run(row["doc_id"]) is not None:
                # Only the attempt's columns: the matched row keeps every column not given.
                columns = ("doc_id", *FAILURE_COLUMNS,
                           *(k for k in ATTEMPT_COLUMNS if row.get(k) is not None))
                data = pa.Table.from_pylist(
                    [{k: row[k] for k in columns}],
                    schema=pa.schema([DOCUMENTS_SCHEMA.field(k) for k in columns]),
                )
                merge = table.merge_insert("doc_id").when_matched_update_all()
            else:
                data = _to_table([row], DOCUMENTS_SCHEMA)
                merge = (table.merge_insert("doc_id").when_matched_update_all()
                         .when_not_matched_insert_all())
            self._write(f"record the failure of {row['doc_id']}", lambda: merge.execute(data))
        self._compact_documents_when_fragmented()

    def _compact_documents_when_fragmented(self) -> None:
        """Compact the documents table once it holds DOCUMENTS_COMPACTION_FRAGMENTS
        fragments (a commit or failure record just wrote one)."""
        table = self.table(DOCUMENTS)
        if table is None:
            return
        with self._storage("read the statistics of the documents table"):
            fragments = table.stats()["fragment_stats"]["num_fragments"]
        if fragments < DOCUMENTS_COMPACTION_FRAGMENTS:
            return
        with self._hold_tables():
            self._write("compact the documents table", lambda: table.optimize())

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

    # Maintenance -----------------------------------------------------------------------
    def optimize(self, vector_index_threshold: int | None = None,
                 cleanup_older_than: timedelta | None = None) -> dict[str, str]:
        """Fold new rows into the full-text indexes, compact small fragments, and build a
        vector index on a table once it holds ``vector_index_threshold`` rows (below that,
        search stays exact). Returns what was done per table."""
        threshold = vector_index_threshold or self.vector_index_threshold
        done: dict[str, str] = {}
        for name in (DOCUMENTS, CHUNKS, PROPOSITIONS):
            table = self.table(name)
            if table is None:
                continue
            with self._hold_tables():
                if name != DOCUMENTS:
                    self._ensure_fts(table, name)
                # Compaction plus an incremental update of every index over the new rows;
                # a no-op (no new version) when there is nothing to do.
                self._write(f"optimize {name}",
                            lambda table=table: table.optimize(
                                cleanup_older_than=cleanup_older_than))
                actions = ["optimized"]
                for column in _SCALAR_INDEXES.get(name, {}):
                    if self._ensure_scalar_index(table, name, column):
                        actions.append(f"built the {column} index")
                if name != DOCUMENTS:
                    action = self._train_vector_index(table, name, threshold)
                    if action:
                        actions.append(action)
            done[name] = ", ".join(actions)
        return done

    def _ensure_scalar_index(self, table: Any, name: str, column: str) -> bool:
        """Build the scalar index _SCALAR_INDEXES names for ``column`` once; optimize()
        folds new rows into it afterwards. Returns whether it was built now."""
        if any(i.columns == [column] for i in table.list_indices()):
            return False
        import lancedb.index

        config = getattr(lancedb.index, _SCALAR_INDEXES[name][column])()
        self._write(f"build the {column} index of {name}",
                    lambda: table.create_index(column, config=config, replace=True))
        return True

    def _train_vector_index(self, table: Any, name: str, threshold: int) -> str | None:
        """Train the IVF_FLAT index once the table reaches ``threshold`` rows, and re-train it
        once the table has grown VECTOR_INDEX_RETRAIN_GROWTH times past the rows it was
        trained on (kept in the index name). Returns what was done, or None."""
        rows = self._count(table, None)
        current = [i for i in table.list_indices() if VECTOR in i.columns and i.index_type != "FTS"]
        if current:
            trained = VECTOR_INDEX_NAME.fullmatch(current[0].name)
            # An index of another kind or name (an older propdex) is replaced at once.
            if trained and rows < VECTOR_INDEX_RETRAIN_GROWTH * int(trained.group(1)):
                return None
        elif rows < threshold:
            return None
        from lancedb.index import IvfFlat

        partitions = vector_index_partitions(rows)
        config = IvfFlat(distance_type="cosine", num_partitions=partitions)
        index_name = f"vector_ivf_flat_{rows}_p{partitions}"

        def train() -> None:
            table.create_index(VECTOR, config=config, replace=True, name=index_name)
            for old in current:
                if old.name != index_name:
                    table.drop_index(old.name)

        self._write(f"build the vector index of {name}", train)
        verb = "re-trained" if current else "built"
        return f"{verb} IVF_FLAT vector index ({partitions} partitions) over {rows} rows"

    def has_vector_index(self, name: str) -> bool:
        table = self.table(name)
        return table is not None and _has_vector_index(table)

    # Verification ----------------------------------------------------------------------
    def verify(self) -> list[str]:
        """Problems found between the tables and the documents ledger (empty = consistent)."""
        documents = self.documents(with_text=True)
        chunks = self.read(CHUNKS, [
            "chunk_id", "doc_id", "run_id", "ordinal", "text", "char_start", "char_end",
            "page_start", "page_end", "source", "content_sha256",
        ])
        propositions = self.read(PROPOSITIONS, [
            "prop_id", "chunk_id", "doc_id", "run_id", "passed", "page_start", "page_end",
            "source", "content_sha256",
        ])
        return find_problems(documents, chunks, propositions)


# Helpers ---------------------------------------------------------------------------------
def _is_local(uri: str) -> bool:
    return "://" not in uri


def _absolute(uri: str) -> str:
    """LanceDB needs absolute paths (a relative one resolves against a changing cwd)."""
    return uri if not _is_local(uri) else str(Path(uri).expanduser().resolve())


def _is_commit_conflict(exc: BaseException) -> bool:
    return "commit conflict" in str(exc).lower()


def _has_vector_index(table: Any) -> bool:
    return _vector_index_probes(table) is not None


def vector_index_partitions(rows: int) -> int:
    """Partitions of an IVF_FLAT index trained on ``rows`` rows (VECTOR_INDEX_ROWS_PER_PARTITION
    each, at least two)."""
    return max(2, rows // VECTOR_INDEX_ROWS_PER_PARTITION)


def vector_index_probes(rows: int, partitions: int) -> int:
    """Partitions a search of an index trained on ``rows`` rows in ``partitions`` probes: as
    many as hold VECTOR_INDEX_SCAN_ROWS rows, or VECTOR_INDEX_SCAN_SHARE of them if more."""
    wanted = max(VECTOR_INDEX_SCAN_ROWS, VECTOR_INDEX_SCAN_SHARE * rows)
    return max(1, min(partitions, math.ceil(wanted * partitions / max(rows, 1))))


def _vector_index_probes(table: Any) -> int | None:
    """The probes a search of ``table``'s vector index uses (None: it has none)."""
    for index in table.list_indices():
        if VECTOR in index.columns and index.index_type != "FTS":
            trained = VECTOR_INDEX_NAME.fullmatch(index.name)
            if trained is None:  # an older propdex's index, until optimize() replaces it
                return VECTOR_INDEX_NPROBES
            return vector_index_probes(int(trained.group(1)), int(trained.group(2)))
    return None


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

    chunks = _inherit(chunk_rows, doc, "chunk", ("doc_id", "run_id", "source", "content_sha256"),
                      {"embed_model": doc["embed_model"]})
    for i, c in enumerate(chunks):
        _check_columns(c, schema_for(CHUNKS, 1), f"chunk {i}")
    by_chunk = {}
    for c in chunks:
        if c.get("chunk_id") in by_chunk:
            raise ValueError(f"duplicate chunk_id {c.get('chunk_id')!r}")
        by_chunk[c.get("chunk_id")] = c
    props = _inherit(prop_rows, doc, "proposition",
                     ("doc_id", "run_id", "source", "content_sha256"),
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
