"""The rankings propdex.search reads, asked of the index's LanceDB tables.

A ranking is a list of rows, best first, each with "score" (cosine similarity for vectors,
BM25 for text) and the asked-for columns: a vector search through the table's IVF index with
the probes propdex.store.maintenance chose, a full-text match query through its inverted
index, rows by a filter. The rows may be of old or unfinished runs and rejected
propositions: propdex.search keeps only live rows that passed. ``doc_ids`` (None = every
document) restricts the rows, and so do ``meta``, "key=value" entries every row must hold
(propdex.metadata).

``LanceReader`` is what a reader keeps for its lifetime (the service, MCP, the API): one
LanceDB connection and each table opened once, so that Lance's index and metadata caches live
as long as the reader, and checked out at its latest version by each search. ``Rankings`` is
one search's view: the documents table first, every other table when first ranked, so rows
are at least as new as the live documents that filter them (an uncommitted run is never let
through).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from propdex.store import predicates as p
from propdex.store.datasets import (
    connect_for_reading,
    open_table,
    read_rows,
    select_stored,
    storage_errors,
)
from propdex.store.live import LIVE_COLUMNS, LiveDocuments, LiveDocumentsCache
from propdex.store.maintenance import table_index_probes as vector_index_probes
from propdex.store.schema import CHUNKS, DOCUMENTS, FTS_COLUMN, META, PROPOSITIONS, VECTOR


@runtime_checkable
class RankingSource(Protocol):
    """Something that gives the Rankings of its latest committed state: a LanceReader, or an
    Index (through a LanceReader of its own)."""

    def rankings(self) -> Rankings: ...


class LanceReader:
    """The index at ``index_uri`` read through LanceDB for as long as the reader lives.
    ``exact``: every vector compared, even where a vector index exists (the reference that
    the approximate search's recall is measured against). Thread-safe."""

    def __init__(self, index_uri: str, storage_options: dict[str, str] | None = None, *,
                 exact: bool = False):
        self.index_uri = index_uri
        self.storage_options = storage_options
        self.exact = exact
        self._db: Any = None
        self._tables: dict[str, Any] = {}  # table name -> its opened LanceDB table
        self._lock = threading.Lock()
        self._live = LiveDocumentsCache(self._documents_version, self._documents_rows)

    def rankings(self) -> Rankings:
        """A view of the latest committed state for one search."""
        return Rankings(self, self._live.get())

    def live_documents(self) -> LiveDocuments:
        """The live documents as of the documents table's latest version."""
        return self._live.get()

    def latest(self, name: str) -> Any:
        """Table ``name`` checked out at its latest version, or None without the table.
        The table is opened once and shared by every search of this reader: checking out
        moves it forward in place, so the caches of its indexes stay warm, and a search
        holding it sees rows at least as new as when it first looked."""
        with self._lock:
            table = self._tables.get(name)
        if table is None:
            table = open_table(self._connection, self.index_uri, name)
            if table is None:
                return None
            with self._lock:
                table = self._tables.setdefault(name, table)
        with self.storage(f"check out the latest version of {name}"):
            table.checkout_latest()
        return table

    def _connection(self) -> Any:
        with self._lock:
            if self._db is None:
                self._db = connect_for_reading(self.index_uri, self.storage_options)
            return self._db

    def storage(self, action: str) -> AbstractContextManager[None]:
        """Lance's failures while doing ``action`` as StorageError naming the index."""
        return storage_errors(f"cannot {action} in the index at {self.index_uri}")

    def _documents_version(self) -> int | None:
        documents = self.latest(DOCUMENTS)
        return None if documents is None else documents.version

    def _documents_rows(self, version: int) -> list[dict]:
        # The table at the version just seen or a later one, which LiveDocumentsCache allows:
        # the live documents may be fresher than their key, never older.
        documents = self.latest(DOCUMENTS)
        with self.storage(f"read {DOCUMENTS}"):
            return read_rows(documents, LIVE_COLUMNS).to_pylist()


class Rankings:
    """One search's rankings: the live documents of one documents table version, and every
    other table at its latest version when first ranked."""

    def __init__(self, reader: LanceReader, live: LiveDocuments):
        self.reader = reader
        self.live = live
        self._tables: dict[str, Any] = {}
        self._lock = threading.Lock()  # the rankings of one search run on a thread pool

    def _table(self, name: str) -> Any:
        with self._lock:
            if name not in self._tables:
                self._tables[name] = self.reader.latest(name)
            return self._tables[name]

    def live_documents(self) -> LiveDocuments:
        return self.live

    def vector_ranking(self, table: str, vector: np.ndarray, *, limit: int,
                       columns: Sequence[str], doc_ids: list[str] | None,
                       meta: list[str] | None = None) -> list[dict]:
        opened = self._table(table)
        if opened is None:
            return []
        schema = opened.schema
        stored = set(schema.names)
        if meta and META not in stored:
            return []  # an index written before metadata existed: no row holds any
        query_vector = np.asarray(vector, dtype=np.float32)
        dim = schema.field(VECTOR).type.list_size
        if query_vector.shape != (dim,):
            raise ValueError(f"query vector has shape {query_vector.shape}; {table} holds "
                             f"{dim}-dimensional vectors")
        where = where_for_scope(table, doc_ids, meta)

        def search(present: list[str]) -> list[dict]:
            query = opened.search(query_vector, vector_column_name=VECTOR)
            query = query.distance_type("cosine")
            if self.reader.exact:
                query = query.bypass_vector_index()
            elif (probes := vector_index_probes(opened)) is not None:
                query = query.nprobes(probes)
            if where is not None:
                query = query.where(where, prefilter=True)
            return query.select([*present, "_distance"]).limit(limit).to_arrow().to_pylist()

        with self.reader.storage(f"search {table}"):
            rows = select_stored(stored, columns, search)
        for row in rows:
            row["score"] = 1.0 - float(row.pop("_distance"))
        return rows

    def text_ranking(self, table: str, query: str, *, limit: int, columns: Sequence[str],
                     doc_ids: list[str] | None, meta: list[str] | None = None) -> list[dict]:
        from lancedb.query import MatchQuery

        opened = self._table(table)
        if opened is None or not query.strip():
            return []
        stored = set(opened.schema.names)
        if meta and META not in stored:
            return []  # an index written before metadata existed: no row holds any
        where = where_for_scope(table, doc_ids, meta)

        def search(present: list[str]) -> list[dict]:
            match = opened.search(MatchQuery(query, FTS_COLUMN), query_type="fts")
            if where is not None:
                match = match.where(where, prefilter=True)
            return match.select([*present, "_score"]).limit(limit).to_arrow().to_pylist()

        with self.reader.storage(f"full-text search {table}"):
            rows = select_stored(stored, columns, search)
        for row in rows:
            row["score"] = float(row.pop("_score"))
        return rows

    def chunk_rows(self, chunk_ids: list[str], columns: Sequence[str]) -> list[dict]:
        opened = self._table(CHUNKS)
        if opened is None:
            return []
        with self.reader.storage(f"read {CHUNKS}"):
            return read_rows(opened, columns, p.in_list("chunk_id", chunk_ids)).to_pylist()


def where_for_scope(table: str, doc_ids: list[str] | None,
                    meta: list[str] | None = None) -> str | None:
    """The prefilter for a document scope and the metadata entries every row must hold.
    Without either, rejected propositions are dropped as rows come back rather than by a
    prefilter, which would mask every row of the table first (a large share of a vector
    search's CPU at 1M propositions); they are a minority, and too few rows left make
    propdex.search fetch deeper. A scope stays a prefilter: afterwards it could leave almost
    nothing."""
    scopes = []
    if doc_ids is not None:
        scopes.append(p.in_list("doc_id", doc_ids))
    if meta:
        scopes.append(p.has_all(META, meta))
    if not scopes:
        return None
    if table == PROPOSITIONS:
        scopes.insert(0, "passed = true")
    return p.all_of(*scopes)

