"""The rankings propdex.search reads, asked of Lance through pylance.

A ranking is a list of rows, best first, each with "score" (cosine similarity for vectors,
BM25 for text) and the asked-for columns: a vector search through the table's IVF index with
the probes propdex.store.maintenance chose, a full-text match query through its inverted
index, rows by a filter. The rows may be of old or unfinished runs and rejected
propositions: propdex.search keeps only live rows that passed. ``doc_ids`` (None = every
document) restricts the rows, and so do ``meta``, "key=value" entries every row must hold
(propdex.metadata).

pylance rather than LanceDB: the reads are Lance's own, and importing LanceDB costs a
one-shot `propdex search` most of its start-up (propdex.store.datasets).

``LanceReader`` is what a reader keeps for its lifetime (the service, MCP, the API): each
table opened once, so that Lance's index and metadata caches live as long as the reader, and
checked out at its latest version by each search. ``Rankings`` is one search's view: the
documents table first, every other table when first ranked, so rows are at least as new as
the live documents that filter them (an uncommitted run is never let through).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from propdex.store import maintenance
from propdex.store import predicates as p
from propdex.store.datasets import open_dataset, read_rows, select_stored
from propdex.store.live import LIVE_COLUMNS, LiveDocuments, LiveDocumentsCache
from propdex.store.schema import CHUNKS, DOCUMENTS, FTS_COLUMN, META, PROPOSITIONS, VECTOR


@runtime_checkable
class RankingSource(Protocol):
    """Something that gives the Rankings of its latest committed state: a LanceReader, or an
    Index (through a LanceReader of its own)."""

    def rankings(self) -> Rankings: ...


class LanceReader:
    """The index at ``index_uri`` read through pylance for as long as the reader lives.
    ``exact``: every vector compared, even where a vector index exists (the reference that
    the approximate search's recall is measured against). Thread-safe."""

    def __init__(self, index_uri: str, storage_options: dict[str, str] | None = None, *,
                 exact: bool = False):
        self.index_uri = index_uri
        self.storage_options = storage_options
        self.exact = exact
        self._datasets: dict[str, Any] = {}  # table -> its dataset at the latest version seen
        self._lock = threading.Lock()
        self._live = LiveDocumentsCache(self._documents_version, self._documents_rows)

    def rankings(self) -> Rankings:
        """A view of the latest committed state for one search."""
        return Rankings(self, self._live.get())

    def live_documents(self) -> LiveDocuments:
        """The live documents as of the documents table's latest version."""
        return self._live.get()

    def latest(self, name: str) -> Any:
        """Table ``name``'s dataset at its latest version, or None without the table."""
        with self._lock:
            dataset = self._datasets.get(name)
        if dataset is None:
            dataset = open_dataset(self.index_uri, name, storage_options=self.storage_options)
        else:
            # Checked out from the dataset already open: the new version shares its session,
            # so the caches of the table's indexes stay warm.
            latest = dataset.latest_version
            if latest != dataset.version:
                dataset = dataset.checkout_version(latest)
        if dataset is not None:
            with self._lock:
                held = self._datasets.get(name)
                if held is None or held.version < dataset.version:
                    self._datasets[name] = dataset
        return dataset

    def _documents_version(self) -> int | None:
        documents = self.latest(DOCUMENTS)
        return None if documents is None else documents.version

    def _documents_rows(self, version: int) -> list[dict]:
        documents = self.latest(DOCUMENTS)
        if documents.version != version:
            documents = documents.checkout_version(version)
        return read_rows(documents, LIVE_COLUMNS).to_pylist()


class Rankings:
    """One search's rankings: the live documents of one documents table version, and every
    other table at its latest version when first ranked."""

    def __init__(self, reader: LanceReader, live: LiveDocuments):
        self.reader = reader
        self.live = live
        self._datasets: dict[str, Any] = {}
        self._lock = threading.Lock()  # the rankings of one search run on a thread pool

    def _dataset(self, name: str) -> Any:
        with self._lock:
            if name not in self._datasets:
                self._datasets[name] = self.reader.latest(name)
            return self._datasets[name]

    def live_documents(self) -> LiveDocuments:
        return self.live

    def vector_ranking(self, table: str, vector: np.ndarray, *, limit: int,
                       columns: Sequence[str], doc_ids: list[str] | None,
                       meta: list[str] | None = None) -> list[dict]:
        dataset = self._dataset(table)
        if dataset is None or not _can_hold(dataset, meta):
            return []
        query = np.asarray(vector, dtype=np.float32)
        stored = dataset.schema.field(VECTOR).type.list_size
        if query.shape != (stored,):
            raise ValueError(f"query vector has shape {query.shape}; {table} holds "
                             f"{stored}-dimensional vectors")
        nearest: dict[str, Any] = {"column": VECTOR, "q": query, "k": limit,
                                   "metric": "cosine"}
        if self.reader.exact:
            nearest["use_index"] = False
        elif (probes := vector_index_probes(dataset)) is not None:
            nearest["nprobes"] = probes
        where = where_for_scope(table, doc_ids, meta)
        rows = select_stored(set(dataset.schema.names), columns, lambda present: dataset.scanner(
            columns=[*present, "_distance"], nearest=nearest, filter=where,
            prefilter=where is not None).to_table().to_pylist())
        for row in rows:
            row["score"] = 1.0 - float(row.pop("_distance"))
        return rows

    def text_ranking(self, table: str, query: str, *, limit: int, columns: Sequence[str],
                     doc_ids: list[str] | None, meta: list[str] | None = None) -> list[dict]:
        from lance.query import MatchQuery

        dataset = self._dataset(table)
        if dataset is None or not query.strip() or not _can_hold(dataset, meta):
            return []
        where = where_for_scope(table, doc_ids, meta)
        rows = select_stored(set(dataset.schema.names), columns, lambda present: dataset.scanner(
            columns=[*present, "_score"], full_text_query=MatchQuery(query, FTS_COLUMN),
            filter=where, prefilter=where is not None, limit=limit).to_table().to_pylist())
        for row in rows:
            row["score"] = float(row.pop("_score"))
        return rows

    def chunk_rows(self, chunk_ids: list[str], columns: Sequence[str]) -> list[dict]:
        dataset = self._dataset(CHUNKS)
        if dataset is None:
            return []
        return read_rows(dataset, columns, p.in_list("chunk_id", chunk_ids)).to_pylist()


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


def _can_hold(dataset: Any, meta: list[str] | None) -> bool:
    """Whether rows of ``dataset`` can hold the ``meta`` entries: an index written before
    metadata existed has no such column, and a filter on it matches nothing."""
    return not meta or META in dataset.schema.names


def vector_index_probes(dataset: Any) -> int | None:
    """The probes for the table's vector index (None: it has none)."""
    for index in dataset.describe_indices():
        if VECTOR in index.field_names and index.index_type != "Inverted":
            trained = maintenance.VECTOR_INDEX_NAME.fullmatch(index.name)
            if trained is None:  # an older propdex's index
                return maintenance.VECTOR_INDEX_NPROBES
            return maintenance.vector_index_probes(int(trained.group(1)),
                                                   int(trained.group(2)))
    return None
