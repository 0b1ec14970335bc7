"""Where propdex.search gets its rankings: the ``Rankings`` protocol, and LanceDB's answer.

A ranking is a list of rows, best first, each with "score" (cosine similarity for vectors,
BM25 for text) and the asked-for columns -- or, from a source that defers them, only the
asked-for RANKING_KEYS, the rest set by ``complete`` on the rows a search keeps (most rows
of a ranking never reach a result, and the resident view spent a fifth of a search making
Python values of columns nobody read). A source may return rows of old or unfinished runs
and rejected propositions: propdex.search keeps only live rows that passed, so every source
is filtered by the same rule. ``doc_ids`` (None = every document) restricts the rows.

LanceRankings asks LanceDB on every call: what an Index searched directly and `propdex serve
--engine lancedb` rank with. A one-shot `propdex search` asks the same of Lance through
pylance without importing LanceDB (propdex.store.dataset_rankings.DatasetRankings).
propdex.resident.ResidentView answers the same calls from memory for a long-running reader,
and one more that propdex.search uses where a source has it: ``ranked_groups``, a one-signal
ranking already grouped by parent chunk as propdex.search groups one, whose rows become
dicts only for the groups a search looks up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from propdex.store import predicates as p
from propdex.store.index import Index
from propdex.store.live import LiveDocuments
from propdex.store.schema import CHUNKS, PROPOSITIONS

# What propdex.search reads of every ranked row to filter, group and fuse rankings.
RANKING_KEYS = frozenset({"prop_id", "chunk_id", "doc_id", "run_id", "passed"})


@runtime_checkable
class RankingSource(Protocol):
    """Something that gives the Rankings of its latest committed state: an Index (LanceDB
    at each call) or a ResidentIndex (its current view)."""

    def rankings(self) -> Rankings: ...


class Rankings(Protocol):
    # True when a ranking's work happens outside the GIL, so that propdex.search runs the
    # rankings of one search at once on its thread pool.
    concurrent: bool

    def live_documents(self) -> LiveDocuments: ...

    def vector_ranking(self, table: str, vector: np.ndarray, *, limit: int,
                       columns: Sequence[str], doc_ids: list[str] | None) -> list[dict]: ...

    def text_ranking(self, table: str, query: str, *, limit: int, columns: Sequence[str],
                     doc_ids: list[str] | None) -> list[dict]: ...

    def chunk_rows(self, chunk_ids: list[str], columns: Sequence[str]) -> list[dict]: ...

    def complete(self, table: str, rows: list[dict], columns: Sequence[str]) -> None:
        """Set ``columns`` on ranked rows of ``table`` still without them (in place)."""


class LanceRankings:
    """Rankings read from the LanceDB tables of ``index`` at each call."""

    concurrent = True  # LanceDB queries run in Rust without the GIL

    def __init__(self, index: Index):
        self.index = index

    def live_documents(self) -> LiveDocuments:
        return self.index.live_documents()

    def vector_ranking(self, table: str, vector: np.ndarray, *, limit: int,
                       columns: Sequence[str], doc_ids: list[str] | None) -> list[dict]:
        rows = self.index.vector_search(table, vector, limit=limit, columns=columns,
                                        where=where_for_scope(table, doc_ids))
        for row in rows:
            row["score"] = 1.0 - float(row.pop("_distance"))
        return rows

    def text_ranking(self, table: str, query: str, *, limit: int, columns: Sequence[str],
                     doc_ids: list[str] | None) -> list[dict]:
        rows = self.index.text_search(table, query, limit=limit, columns=columns,
                                      where=where_for_scope(table, doc_ids))
        for row in rows:
            row["score"] = float(row.pop("_score"))
        return rows

    def chunk_rows(self, chunk_ids: list[str], columns: Sequence[str]) -> list[dict]:
        return self.index.read(CHUNKS, columns, p.in_list("chunk_id", chunk_ids))

    def complete(self, table: str, rows: list[dict], columns: Sequence[str]) -> None:
        """Nothing to do: LanceDB returns every asked-for column with the ranking, at about
        the cost of the keys alone, where a second query would cost milliseconds."""


def where_for_scope(table: str, doc_ids: list[str] | None) -> str | None:
    """The prefilter for a document scope. Without one, rejected propositions are dropped as
    rows come back rather than by a prefilter, which masks every row of the table first: at
    1M propositions that cost a vector search 17 ms of CPU of its 40 (bench/bench_serve.py).
    They are a minority, and too few rows left make propdex.search fetch deeper. A document
    scope stays a prefilter: afterwards it could leave almost nothing."""
    if doc_ids is None:
        return None
    scope = p.in_list("doc_id", doc_ids)
    return p.all_of("passed = true", scope) if table == PROPOSITIONS else scope
