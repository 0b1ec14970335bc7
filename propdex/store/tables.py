"""The LanceDB tables of an index: connection, opening and creating tables (with their
full-text index), schema evolution, writer locks and reads. propdex.store.replacement writes
through them, propdex.store.maintenance keeps them fast, propdex.store.index puts it together.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from propdex.errors import StorageError
from propdex.store import predicates as p
from propdex.store.datasets import storage_errors
from propdex.store.live import LiveDocuments, LiveDocumentsCache
from propdex.store.locks import WriterLocks
from propdex.store.schema import (
    DOCUMENTS,
    DOCUMENTS_SCHEMA,
    FTS_COLUMN,
    schema_for,
    vector_dim,
)

T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


class Tables:
    """The tables of one LanceDB database, opened on first use. Thread-safe."""

    uri: str
    storage_options: dict[str, str] | None
    dim: int | None
    create: bool
    _db: Any
    _tables: dict[str, Any]
    _fts_checked: set[str]
    _migrated: set[str]
    _guard: threading.RLock
    _locks: WriterLocks
    _live: LiveDocumentsCache

    # Connection and tables -----------------------------------------------------------
    @contextmanager
    def _storage(self, action: str) -> Iterator[None]:
        """Turn LanceDB and OS failures into StorageError naming the database."""
        with storage_errors(f"cannot {action} in the index at {self.uri}"):
            yield

    def _connect(self, *, for_write: bool) -> Any:
        with self._guard:
            if self._db is not None:
                return self._db
            if is_local(self.uri) and not Path(self.uri).is_dir():
                if not for_write:
                    return None  # reading a database that does not exist: nothing to read
                if not self.create:
                    raise StorageError(f"no index at {self.uri}")
            import lancedb  # on first connection: commands that open no index never import it

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
                     ) -> Iterator[pa.RecordBatch]:
        """``read`` as a stream of Arrow record batches, so that a reader of a large table
        holds one batch at a time rather than the whole table twice."""
        table = self.table(name)
        if table is None:
            return
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

    def live_documents(self) -> LiveDocuments:
        """The documents with a searchable version (run_id, title, source), as of the
        documents table's latest version; re-read only when that version changed."""
        return self._live.get()

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


def is_local(uri: str) -> bool:
    return "://" not in uri


def absolute_uri(uri: str) -> str:
    """LanceDB needs absolute paths (a relative one resolves against a changing cwd)."""
    return uri if not is_local(uri) else str(Path(uri).expanduser().resolve())


def _is_commit_conflict(exc: BaseException) -> bool:
    return "commit conflict" in str(exc).lower()
