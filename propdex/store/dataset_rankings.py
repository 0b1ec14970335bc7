"""Rankings read through pylance: what a one-shot `propdex search` ranks with.

The same queries as propdex.store.ranking.LanceRankings -- a vector search through the
table's IVF index with the same probes, a full-text match query through its inverted index,
rows by a filter -- asked of Lance directly, so that the command never imports LanceDB
(propdex.store.datasets says why). Each table is opened once, at its latest version, the
documents table first: rows are at least as new as the live documents that filter them.
tests/test_dataset_rankings.py holds the results to LanceRankings' for every level, mode
and filter.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from propdex.store import predicates as p
from propdex.store.datasets import open_dataset, read_rows, select_stored
from propdex.store.index import VECTOR_INDEX_NAME, VECTOR_INDEX_NPROBES, vector_index_probes
from propdex.store.live import LIVE_COLUMNS, LiveDocuments
from propdex.store.ranking import where_for_scope
from propdex.store.schema import CHUNKS, DOCUMENTS, FTS_COLUMN, VECTOR


class DatasetRankings:
    """Rankings of the index at ``index_uri`` read through pylance, each table at the
    version it had when first read."""

    concurrent = True  # Lance runs each query in Rust without the GIL

    def __init__(self, index_uri: str, storage_options: dict[str, str] | None = None):
        self.index_uri = index_uri
        self.storage_options = storage_options
        self._datasets: dict[str, Any] = {}
        self._lock = threading.Lock()  # the rankings of one search run on a thread pool
        self._live: LiveDocuments | None = None

    def _dataset(self, name: str) -> Any:
        with self._lock:
            if name not in self._datasets:
                self._datasets[name] = open_dataset(self.index_uri, name,
                                                    storage_options=self.storage_options)
            return self._datasets[name]

    def live_documents(self) -> LiveDocuments:
        if self._live is None:
            documents = self._dataset(DOCUMENTS)
            if documents is None:
                self._live = LiveDocuments(None)
            else:
                self._live = LiveDocuments.of_rows(
                    documents.version, read_rows(documents, LIVE_COLUMNS).to_pylist())
        return self._live

    def vector_ranking(self, table: str, vector: np.ndarray, *, limit: int,
                       columns: Sequence[str], doc_ids: list[str] | None) -> list[dict]:
        dataset = self._dataset(table)
        if dataset is None:
            return []
        query = np.asarray(vector, dtype=np.float32)
        stored = dataset.schema.field(VECTOR).type.list_size
        if query.shape != (stored,):
            raise ValueError(f"query vector has shape {query.shape}; {table} holds "
                             f"{stored}-dimensional vectors")
        nearest = {"column": VECTOR, "q": query, "k": limit, "metric": "cosine"}
        probes = _probes(dataset)
        if probes is not None:
            nearest["nprobes"] = probes
        where = where_for_scope(table, doc_ids)
        rows = select_stored(set(dataset.schema.names), columns, lambda present: dataset.scanner(
            columns=[*present, "_distance"], nearest=nearest, filter=where,
            prefilter=where is not None).to_table().to_pylist())
        for row in rows:
            row["score"] = 1.0 - float(row.pop("_distance"))
        return rows

    def text_ranking(self, table: str, query: str, *, limit: int, columns: Sequence[str],
                     doc_ids: list[str] | None) -> list[dict]:
        from lance.query import MatchQuery

        dataset = self._dataset(table)
        if dataset is None or not query.strip():
            return []
        where = where_for_scope(table, doc_ids)
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

    def complete(self, table: str, rows: list[dict], columns: Sequence[str]) -> None:
        """Nothing to do: every asked-for column comes with the ranking."""


def _probes(dataset: Any) -> int | None:
    """The probes LanceRankings uses for the table's vector index (None: it has none)."""
    for index in dataset.describe_indices():
        if VECTOR in index.field_names and index.index_type != "Inverted":
            trained = VECTOR_INDEX_NAME.fullmatch(index.name)
            if trained is None:  # an older propdex's index
                return VECTOR_INDEX_NPROBES
            return vector_index_probes(int(trained.group(1)), int(trained.group(2)))
    return None
