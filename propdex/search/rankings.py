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

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import pyarrow as pa

from propdex.errors import StorageError
from propdex.store import predicates as p
from propdex.store.datasets import (
    connect,
    open_table,
    read_rows,
    run,
    storage_errors,
    table_folder,
    with_absent_columns,
)
from propdex.store.live import LIVE_COLUMNS, LiveDocuments, LiveDocumentsCache
from propdex.store.maintenance import probes_of_indices
from propdex.store.schema import CHUNKS, DOCUMENTS, FTS_COLUMN, META, PROPOSITIONS, VECTOR

T = TypeVar("T")


@runtime_checkable
class RankingSource(Protocol):
    """Something that gives the Rankings of its latest committed state: a LanceReader, or an
    Index (through a LanceReader of its own)."""

    def rankings(self) -> Rankings: ...


@dataclass(frozen=True)
class TableState:
    """What a search needs to know of a table at one version."""

    version: int
    columns: frozenset[str]
    dim: int | None  # of its vectors; None: the table holds none
    probes: int | None  # of its vector index; None: it has none


class LanceReader:
    """The index at ``index_uri`` read through LanceDB for as long as the reader lives.
    ``exact``: every vector compared, even where a vector index exists (the reference that
    the approximate search's recall is measured against). Thread-safe: every read runs on
    LanceDB's event loop, which alone touches the reader's tables."""

    def __init__(self, index_uri: str, storage_options: dict[str, str] | None = None, *,
                 exact: bool = False):
        self.index_uri = index_uri
        self.storage_options = storage_options
        self.exact = exact
        self._db: Any = None
        self._tables: dict[str, Any] = {}  # table name -> its opened AsyncTable
        self._states: dict[str, TableState] = {}  # table name -> its state, latest seen
        # table name -> the folder (table_folder) its opened table was read from
        self._folders: dict[str, tuple[int, int]] = {}
        self._live = LiveDocumentsCache(self._documents_version, self._documents_rows)

    def rankings(self) -> Rankings:
        """A view of the latest committed state for one search."""
        return Rankings(self, self._live.get())

    def live_documents(self) -> LiveDocuments:
        """The live documents as of the documents table's latest version."""
        return self._live.get()

    def table_state(self, name: str) -> tuple[TableState, int] | None:
        """Table ``name``'s state at its latest version and its row count (None: no such
        table)."""

        async def state() -> tuple[TableState, int] | None:
            table = await self.latest(name)
            if table is None:
                return None
            return await self.state(name, table), await table.count_rows()

        return self.read(state())

    def read(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """``coroutine`` run on LanceDB's event loop, the one thread that touches the
        reader's tables."""
        return run(coroutine)

    async def latest(self, name: str) -> Any:
        """Table ``name`` (a LanceDB AsyncTable) checked out at its latest version, or None
        without the table. The table is opened once and shared by every search of this
        reader: checking out moves it forward in place, so the caches of its indexes stay
        warm, and a search holding it sees rows at least as new as when it first looked."""
        folder = table_folder(self.index_uri, name)
        if folder != self._folders.get(name):
            # Removed, moved away or replaced (another index copied or moved in its place):
            # the opened table, its state and the live documents belong to the old folder.
            self._forget(name)
        if folder is None:
            return None
        table = self._tables.get(name)
        with storage_errors(f"cannot open table {name} in the index at {self.index_uri}"):
            if table is None:
                if self._db is None:
                    self._db = await connect(self.index_uri, self.storage_options)
                table = await open_table(self._db, name)
                if table is None:
                    return None
                table = self._tables.setdefault(name, table)
                self._folders[name] = folder
            await table.checkout_latest()
        return table

    def _forget(self, name: str) -> None:
        """Drop what was read of table ``name`` (on LanceDB's event loop, like every read)."""
        self._tables.pop(name, None)
        self._states.pop(name, None)
        self._folders.pop(name, None)
        if name == DOCUMENTS:
            self._live.forget()

    async def state(self, name: str, table: Any) -> TableState:
        """The TableState of ``table`` (table ``name``) at its checked-out version, looked up
        again only when the version changed."""
        version = await table.version()
        known = self._states.get(name)
        if known is not None and known.version == version:
            return known
        schema = await table.schema()
        dim = schema.field(VECTOR).type.list_size if VECTOR in schema.names else None
        state = TableState(version, frozenset(schema.names), dim,
                           probes_of_indices(await table.list_indices()))
        if known is None or known.version < version:
            self._states[name] = state
        return state

    def _documents_version(self) -> int | None:
        async def version() -> int | None:
            documents = await self.latest(DOCUMENTS)
            return None if documents is None else await documents.version()

        return self.read(version())

    def _documents_rows(self, version: int) -> list[dict]:
        # The table at the version just seen or a later one, which LiveDocumentsCache allows:
        # the live documents may be fresher than their key, never older.
        async def rows() -> pa.Table:
            documents = await self.latest(DOCUMENTS)
            state = await self.state(DOCUMENTS, documents)
            return await read_rows(documents, state.columns, LIVE_COLUMNS)

        return self.read(rows()).to_pylist()


class Rankings:
    """One search's rankings: the live documents of one documents table version, and every
    other table at its latest version when first ranked."""

    def __init__(self, reader: LanceReader, live: LiveDocuments):
        self.reader = reader
        self.live = live
        # table name -> the task checking it out, awaited by every ranking of it: created
        # and read on LanceDB's event loop only.
        self._checkouts: dict[str, asyncio.Task] = {}

    async def _table(self, name: str) -> tuple[Any, TableState | None]:
        if name not in self._checkouts:
            self._checkouts[name] = asyncio.ensure_future(self.reader.latest(name))
        table = await self._checkouts[name]
        if table is None:
            return None, None
        return table, await self.reader.state(name, table)

    def live_documents(self) -> LiveDocuments:
        return self.live

    def vector_ranking(self, table: str, vector: np.ndarray, *, limit: int,
                       columns: Sequence[str], doc_ids: list[str] | None,
                       meta: list[str] | None = None,
                       embed_models: Sequence[str | None] | None = None) -> list[dict]:
        """``embed_models``: only rows of these embed_model values (None among them: rows
        without one), the documents of the query's vector space (propdex.store.live)."""
        query_vector = np.asarray(vector, dtype=np.float32)

        def nearest(opened: Any, state: TableState) -> Any:
            if query_vector.shape != (state.dim,):
                # The index was built with another embedder: as at ingest (store.tables), a
                # StorageError, which passes _ranked's wrapping (not a table it cannot read).
                raise StorageError(
                    f"the query vector has shape {query_vector.shape} but the {table} table "
                    f"in {self.reader.index_uri} holds {state.dim}-dimensional vectors; "
                    f"search with the embedder the index was built with")
            query = opened.query().nearest_to(query_vector).column(VECTOR)
            query = query.distance_type("cosine")
            if self.reader.exact:
                return query.bypass_vector_index()
            return query if state.probes is None else query.nprobes(state.probes)

        rows = self._ranking(table, nearest, "_distance", limit, columns, doc_ids, meta,
                             embed_models)
        for row in rows:
            row["score"] = 1.0 - float(row.pop("_distance"))
        return rows

    def text_ranking(self, table: str, query: str, *, limit: int, columns: Sequence[str],
                     doc_ids: list[str] | None, meta: list[str] | None = None) -> list[dict]:
        if not query.strip():
            return []

        def matching(opened: Any, state: TableState) -> Any:
            from lancedb.query import MatchQuery

            return opened.query().nearest_to_text(MatchQuery(query, FTS_COLUMN))

        rows = self._ranking(table, matching, "_score", limit, columns, doc_ids, meta)
        for row in rows:
            row["score"] = float(row.pop("_score"))
        return rows

    def _ranking(self, table: str, ask: Callable[[Any, TableState], Any], score: str,
                 limit: int, columns: Sequence[str], doc_ids: list[str] | None,
                 meta: list[str] | None,
                 embed_models: Sequence[str | None] | None = None) -> list[dict]:
        """The ``limit`` best rows of ``table`` by the query ``ask`` makes of the opened
        table, with ``columns`` and the ``score`` column, within the scope."""

        async def ranking() -> pa.Table | None:
            opened, state = await self._table(table)
            if opened is None or not _can_hold(state, meta):
                return None
            query = ask(opened, state)
            if (where := where_for_scope(table, doc_ids, meta, embed_models)) is not None:
                query = query.where(where)  # a prefilter, as where() is by default
            present = [c for c in columns if c in state.columns]
            rows = await query.select([*present, score]).limit(limit).to_arrow()
            return with_absent_columns(rows, state.columns, columns)

        return self._ranked(table, ranking())

    def chunk_rows(self, chunk_ids: list[str], columns: Sequence[str]) -> list[dict]:
        async def rows() -> pa.Table | None:
            opened, state = await self._table(CHUNKS)
            if opened is None:
                return None
            return await read_rows(opened, state.columns, columns,
                                   p.in_list("chunk_id", chunk_ids))

        return self._ranked(CHUNKS, rows())

    def _ranked(self, table: str, coroutine: Coroutine[Any, Any, pa.Table | None],
                ) -> list[dict]:
        # A data file Lance cannot read (truncated, removed) fails the search with a
        # StorageError naming the table and the index, not Lance's bare message.
        with storage_errors(f"cannot read table {table} in the index at "
                            f"{self.reader.index_uri}"):
            rows = self.reader.read(coroutine)
        # Rows become Python values here, on the caller's thread, not on the event loop
        # that every ranking of every search shares.
        return [] if rows is None else rows.to_pylist()


def where_for_scope(table: str, doc_ids: list[str] | None, meta: list[str] | None = None,
                    embed_models: Sequence[str | None] | None = None) -> str | None:
    """The prefilter for a document scope, the metadata entries every row must hold and the
    embedding models whose rows a vector ranking may compare (None among them: rows without
    one). Without any, rejected propositions are dropped as rows come back rather than by a
    prefilter, which would mask every row of the table first (a large share of a vector
    search's CPU at 1M propositions); they are a minority, and too few rows left make
    propdex.search fetch deeper. A scope stays a prefilter: afterwards it could leave almost
    nothing. The models are a column filter, answered by the embed_model bitmap index, not a
    list of their documents, whose cost grows with the documents (bench/RESULTS.md,
    "re-embedded")."""
    scopes = []
    if doc_ids is not None:
        scopes.append(p.in_list("doc_id", doc_ids))
    if meta:
        scopes.append(p.has_all(META, meta))
    if embed_models is not None:
        named = p.in_list("embed_model", [m for m in embed_models if m is not None])
        scopes.append(p.any_of(named, "embed_model IS NULL") if None in embed_models else named)
    if not scopes:
        return None
    if table == PROPOSITIONS:
        scopes.insert(0, "passed = true")
    return p.all_of(*scopes)


def _can_hold(state: TableState, meta: list[str] | None) -> bool:
    """Whether rows of a table can hold the ``meta`` entries: an index written before
    metadata existed has no such column, and a filter on it matches nothing."""
    return not meta or META in state.columns
