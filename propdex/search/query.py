"""Search the index: propositions expanded to their parent chunks, chunks, or both.

Scores are "higher is better" in every mode: cosine similarity (1 - cosine distance) for
vector search, the BM25 score for full-text search, and for hybrid search the reciprocal
rank fusion (k = 60) of the vector and full-text rankings. Proposition hits are grouped by
parent chunk, each parent scored by its best proposition (Dense X Retrieval's
passage-level scoring). Only live rows count: a row whose (doc_id, run_id) is not the
documents row's committed run is an old or unfinished version and is skipped.

``level="both"`` fuses at the chunk level: every table and mode gives its own ranking of
parent chunks (propositions lift their parent, ranked by its best proposition), and the
rankings are combined by reciprocal rank fusion, so a chunk that both its propositions
and its own text rank well comes first. The fused score is the RRF score. The default
search (DEFAULT_LEVEL, DEFAULT_MODE) is the one that won on eval/dev_questions.jsonl;
the CLI, the service and the evaluation use these constants.

The rankings come from Lance (propdex.search.rankings): a LanceReader a reader keeps, or an
Index's own. It must not import Prefect (search starts in a second).
"""

from __future__ import annotations

import fnmatch
import functools
import json
import math
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Literal, TypeVar

import numpy as np

from propdex.search.embedders import embedder_mismatch, vector_left_out
from propdex.search.fusion import best_ranks, fused_propositions, reciprocal_rank_fusion
from propdex.search.rankings import Rankings, RankingSource
from propdex.store.schema import CHUNKS, PROPOSITIONS

Level = Literal["propositions", "chunks", "both"]
Mode = Literal["vector", "fts", "hybrid"]

# Defaults of every entry point (CLI, service, MCP, Python API, evaluation): they take
# these, so a change here changes them all. Level and mode are the search that won on
# eval/dev_questions.jsonl (README, Evaluation): hybrid over both tables, chunk-level RRF.
DEFAULT_LEVEL: Level = "both"
DEFAULT_MODE: Mode = "hybrid"
DEFAULT_K = 5

# Parent chunks each ranking contributes to a fused ("both") ranking: deeper than k, so
# a chunk ranked 8th by one signal and 2nd by another still gets both contributions.
FUSION_DEPTH = 20
# Rows fetched per wanted result before filtering and grouping; grown 4x while too few
# live results (or distinct parents) come back and the ranking is not exhausted.
# Every row fetched costs time; these depths keep the dev-set scores of deeper ones
# (bench/RESULTS.md).
_OVERFETCH = {PROPOSITIONS: 5, CHUNKS: 3}
_MIN_DEPTH = 50

CHUNK_COLUMNS = ["chunk_id", "doc_id", "run_id", "text", "header", "section", "page_start",
                  "page_end", "char_start", "char_end", "boxes"]
PROP_COLUMNS = ["prop_id", "chunk_id", "doc_id", "run_id", "text", "page_start", "page_end",
                 "passed", "boxes"]


# The rankings of one search run at once: each is a Lance query whose work happens in Rust
# without the GIL, so the default search (four rankings) takes about the time of its slowest
# ones rather than their sum. The pool is shared by all
# searches of a process; the calling thread runs one ranking itself, and pool workers never
# wait on the pool, so concurrent searches queue but cannot deadlock.
_RANKING_WORKERS = 8
T = TypeVar("T")
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _ranking_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_RANKING_WORKERS, thread_name_prefix="propdex-search")
        return _pool


def _all_at_once(calls: list[Callable[[], T]]) -> list[T]:
    """Results of ``calls`` in order, run concurrently (the last one in this thread)."""
    if len(calls) < 2:
        return [call() for call in calls]
    futures: list[Future[T]] = [_ranking_pool().submit(call) for call in calls[:-1]]
    last = calls[-1]()
    return [future.result() for future in futures] + [last]


class _OnceVector:
    """The query vector, computed at most once by whichever ranking asks first."""

    def __init__(self, source: np.ndarray | Callable[[], np.ndarray] | None):
        self._source = source
        self._vector: np.ndarray | None = (
            None if source is None or callable(source) else np.asarray(source))
        self._lock = threading.Lock()

    def __call__(self) -> np.ndarray:
        if self._vector is None:
            with self._lock:
                if self._vector is None:
                    self._vector = np.asarray(self._source())  # type: ignore[misc, operator]
        return self._vector


@dataclass
class SearchResult:
    text: str  # the best proposition for proposition hits, the chunk text for chunk hits
    score: float
    level: Literal["proposition", "chunk"]
    doc_id: str
    chunk_id: str
    prop_id: str | None
    chunk_text: str | None  # the parent chunk's text (None only if the parent is missing)
    header: str | None
    section: str | None
    title: str | None
    source: str | None
    page_start: int | None
    page_end: int | None
    char_start: int | None
    char_end: int | None
    propositions: list[dict] = field(default_factory=list)  # {prop_id, text, score}, best first
    # The document's metadata (propdex.metadata): key -> value, or list of values.
    metadata: dict = field(default_factory=dict)
    # Page rectangles of the hit ({page, x0, y0, x1, y1} in PDF points): the proposition's
    # for proposition hits, the chunk's for chunk hits; None without (non-PDF sources).
    boxes: list[dict] | None = None
    # The search's, on each of its results: the live documents its vector rankings left out,
    # embedded with another model than the query's (propdex.search.embedders); None: none.
    vector_left_out: dict | None = None

    def to_dict(self) -> dict:
        # Shallow: every field is a plain value but the propositions and boxes, copied one
        # level. (dataclasses.asdict deep-copies value by value: 130 microseconds for ten
        # results.)
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["propositions"] = [dict(p) for p in self.propositions]
        if self.boxes is not None:
            values["boxes"] = [dict(b) for b in self.boxes]
        if self.vector_left_out is not None:
            values["vector_left_out"] = {
                **self.vector_left_out,
                "embed_models": dict(self.vector_left_out["embed_models"])}
        return values


@dataclass(frozen=True)
class _Scope:
    """What every ranking of one search is restricted to."""

    doc_ids: list[str] | None  # None: every live document
    meta: list[str] | None  # "key=value" entries each row must hold; None: no filter
    # The embed_model values of the rows the vector rankings search (VectorSplit); None: all
    embed_models: tuple[str | None, ...] | None = None


@dataclass
class _Ranked:
    rows: list[dict]  # live rows, best first, each with "score"
    exhausted: bool  # the store had no more rows to give


def search(
    index: RankingSource | Rankings,
    query: str,
    query_vector: np.ndarray | Callable[[], np.ndarray] | None,
    *,
    level: Level = DEFAULT_LEVEL,
    mode: Mode = DEFAULT_MODE,
    k: int = DEFAULT_K,
    doc_ids: list[str] | None = None,
    source_glob: str | None = None,
    meta: list[str] | None = None,
    embed_model: str | None = None,
) -> list[SearchResult]:
    """The top ``k`` results for ``query``; [] when the index is empty or does not exist.
    ``meta``: "key=value" entries a result's document must hold, every one of them
    (propdex.metadata.filter_entries).

    ``query_vector`` may be a function that embeds the query: it is then called once, by the
    first vector ranking, while the full-text rankings already run. ``embed_model``: the
    model that embeds it; the vector rankings then search only documents of its vector space
    and each result's ``vector_left_out`` names the others (propdex.search.embedders), and
    EmbedderMismatchError refuses a search none of whose documents is of that space."""
    if level not in ("propositions", "chunks", "both"):
        raise ValueError(f"unknown level {level!r}")
    if mode not in ("vector", "fts", "hybrid"):
        raise ValueError(f"unknown mode {mode!r}")
    if mode != "fts" and query_vector is None:
        raise ValueError(f"{mode} search needs a query vector")
    if k < 1:
        return []

    # One view for the whole search: every ranking of it reads the same committed state.
    source = index.rankings() if isinstance(index, RankingSource) else index
    snapshot = source.live_documents()  # cached per documents table version
    documents, live = snapshot.documents, snapshot.runs
    allowed = _allowed_documents(documents, live, doc_ids, source_glob)
    if not live or allowed == []:
        return []
    scope, left_out = _Scope(allowed, meta or None), None
    if mode != "fts" and embed_model is not None:
        split = snapshot.vector_split(embed_model, allowed)
        if split.left_out and not split.searched:
            raise embedder_mismatch(source.reader.index_uri, embed_model, split,
                                    scoped=allowed is not None)
        if split.left_out:
            scope = _Scope(allowed, meta or None, split.embed_models)
            left_out = vector_left_out(split, embed_model, hybrid=mode == "hybrid")
    vector = _OnceVector(query_vector)
    if level == "propositions":
        results = _proposition_results(source, query, vector, mode, k, scope, live,
                                       documents)[:k]
    elif level == "chunks":
        results = _chunk_results(source, query, vector, mode, k, scope, live, documents)[:k]
    else:
        results = _fused_results(source, query, vector, mode, k, scope, live, documents)
    for result in results:
        stored = documents[result.doc_id].get("metadata")
        result.metadata = json.loads(stored) if stored else {}
        result.vector_left_out = left_out
    return results


def _allowed_documents(documents: dict[str, dict], live: dict[str, str],
                       doc_ids: list[str] | None, source_glob: str | None) -> list[str] | None:
    """The live documents the filters let through, or None when there is no filter.
    The glob is matched here in Python, never turned into a predicate."""
    if doc_ids is None and source_glob is None:
        return None
    wanted = set(doc_ids) if doc_ids is not None else None
    return sorted(
        doc_id for doc_id in live
        if (wanted is None or doc_id in wanted)
        and (source_glob is None
             or fnmatch.fnmatchcase(documents[doc_id]["source"] or "", source_glob))
    )


def _ranked(source: Rankings, table: str, query: str, vector: _OnceVector, mode: Mode,
            depth: int, columns: list[str], scope: _Scope, live: dict[str, str],
            ) -> _Ranked:
    key = "prop_id" if table == PROPOSITIONS else "chunk_id"

    def live_rows(rows: list[dict]) -> list[dict]:
        # Chunks have no "passed"; a proposition counts only when it passed its grading.
        # One comprehension rather than a call per row: a served search filters ~300 rows.
        return [row for row in rows
                if live.get(row["doc_id"]) == row["run_id"] and row.get("passed", True) is True]

    def by_vector() -> list[dict]:
        return source.vector_ranking(table, vector(), limit=depth, columns=columns,
                                     doc_ids=scope.doc_ids, meta=scope.meta,
                                     embed_models=scope.embed_models)

    def by_text() -> list[dict]:
        return source.text_ranking(table, query, limit=depth, columns=columns,
                                   doc_ids=scope.doc_ids, meta=scope.meta)

    vector_rows: list[dict] = []
    text_rows: list[dict] = []
    if mode == "hybrid":
        vector_rows, text_rows = _all_at_once([by_vector, by_text])
    elif mode == "vector":
        vector_rows = by_vector()
    else:
        text_rows = by_text()
    exhausted = len(vector_rows) < depth and len(text_rows) < depth
    if mode == "vector":
        return _Ranked(live_rows(vector_rows), exhausted)
    if mode == "fts":
        return _Ranked(live_rows(text_rows), exhausted)
    return _Ranked(reciprocal_rank_fusion([live_rows(vector_rows), live_rows(text_rows)],
                                          key=lambda r: r[key]), exhausted)


def _fetch_groups(source: Rankings, table: str, query: str, vector: _OnceVector, mode: Mode,
                  k: int, columns: list[str], scope: _Scope, live: dict[str, str],
                  ) -> Mapping[str, list[dict]]:
    """Live rows grouped by chunk_id (groups in order of their best row), at least ``k``
    groups unless the store runs out."""
    depth = max(k * _OVERFETCH[table], _MIN_DEPTH)
    while True:
        ranked = _ranked(source, table, query, vector, mode, depth, columns, scope, live)
        by_chunk: dict[str, list[dict]] = {}
        for row in ranked.rows:
            by_chunk.setdefault(row["chunk_id"], []).append(row)
        if len(by_chunk) >= k or ranked.exhausted:
            return dict(list(by_chunk.items())[:k])
        depth *= 4


def _proposition_results(source: Rankings, query: str, vector: _OnceVector, mode: Mode,
                         k: int, scope: _Scope, live: dict[str, str],
                         documents: dict[str, dict]) -> list[SearchResult]:
    groups = _fetch_groups(source, PROPOSITIONS, query, vector, mode, k, PROP_COLUMNS, scope,
                           live)
    parents = _live_chunks(source, list(groups), live)
    results = []
    for chunk_id, props in groups.items():
        best, parent, doc = props[0], parents.get(chunk_id, {}), documents[props[0]["doc_id"]]
        results.append(SearchResult(
            text=best["text"], score=best["score"], level="proposition", doc_id=best["doc_id"],
            chunk_id=chunk_id, prop_id=best["prop_id"], chunk_text=parent.get("text"),
            header=parent.get("header"), section=parent.get("section"), title=doc["title"],
            source=doc["source"], page_start=best["page_start"], page_end=best["page_end"],
            char_start=parent.get("char_start"), char_end=parent.get("char_end"),
            propositions=[{"prop_id": r["prop_id"], "text": r["text"], "score": r["score"]}
                          for r in props],
            boxes=best.get("boxes"),
        ))
    return results


def _live_chunks(source: Rankings, chunk_ids: list[str], live: dict[str, str],
                 ) -> dict[str, dict]:
    if not chunk_ids:
        return {}
    rows = source.chunk_rows(chunk_ids, CHUNK_COLUMNS)
    return {r["chunk_id"]: r for r in rows if live.get(r["doc_id"]) == r["run_id"]}


def _chunk_results(source: Rankings, query: str, vector: _OnceVector, mode: Mode, k: int,
                   scope: _Scope, live: dict[str, str], documents: dict[str, dict],
                   ) -> list[SearchResult]:
    groups = _fetch_groups(source, CHUNKS, query, vector, mode, k, CHUNK_COLUMNS, scope,
                           live)
    results = []
    for chunk_id, (row, *_) in groups.items():
        doc = documents[row["doc_id"]]
        results.append(SearchResult(
            text=row["text"], score=row["score"], level="chunk", doc_id=row["doc_id"],
            chunk_id=chunk_id, prop_id=None, chunk_text=row["text"], header=row["header"],
            section=row["section"], title=doc["title"], source=doc["source"],
            page_start=row["page_start"], page_end=row["page_end"],
            char_start=row["char_start"], char_end=row["char_end"], boxes=row.get("boxes"),
        ))
    return results


def _fused_results(source: Rankings, query: str, vector: _OnceVector, mode: Mode, k: int,
                   scope: _Scope, live: dict[str, str],
                   documents: dict[str, dict]) -> list[SearchResult]:
    """Chunk-level RRF of every (table, signal) ranking: hybrid fuses four rankings
    (propositions and chunks, each by vector and by BM25), vector or fts two."""
    depth = max(k, FUSION_DEPTH)
    signals: list[Mode] = ["vector", "fts"] if mode == "hybrid" else [mode]
    # Each ranking is one signal (no nested hybrid), so these are the only concurrent calls.
    rankings = _all_at_once(
        [functools.partial(_fetch_groups, source, PROPOSITIONS, query, vector, signal, depth,
                           PROP_COLUMNS, scope, live) for signal in signals]
        + [functools.partial(_fetch_groups, source, CHUNKS, query, vector, signal, depth,
                             CHUNK_COLUMNS, scope, live) for signal in signals])
    prop_rankings, chunk_rankings = rankings[:len(signals)], rankings[len(signals):]
    fused = reciprocal_rank_fusion(
        [[{"chunk_id": chunk_id} for chunk_id in ranking]
         for ranking in prop_rankings + chunk_rankings],
        key=lambda r: r["chunk_id"],
    )[:k]
    # A fused chunk's row from the last chunk ranking holding it, else read by id.
    chunk_rows = {f["chunk_id"]: ranking[f["chunk_id"]][0] for ranking in chunk_rankings
                  for f in fused if f["chunk_id"] in ranking}
    chunk_rows.update(_live_chunks(source, [f["chunk_id"] for f in fused
                                           if f["chunk_id"] not in chunk_rows], live))
    props_of = {entry["chunk_id"]: fused_propositions(
        [ranking.get(entry["chunk_id"], []) for ranking in prop_rankings]) for entry in fused}
    prop_ranks, chunk_ranks = best_ranks(prop_rankings), best_ranks(chunk_rankings)
    results = []
    for entry in fused:
        chunk_id = entry["chunk_id"]
        props = props_of[chunk_id]
        chunk_rank = chunk_ranks.get(chunk_id, math.inf)
        parent = chunk_rows.get(chunk_id, {})
        if props and prop_ranks.get(chunk_id, math.inf) <= chunk_rank:
            best = props[0]
            doc = documents[best["doc_id"]]
            results.append(SearchResult(
                text=best["text"], score=entry["score"], level="proposition",
                doc_id=best["doc_id"], chunk_id=chunk_id, prop_id=best["prop_id"],
                chunk_text=parent.get("text"), header=parent.get("header"),
                section=parent.get("section"), title=doc["title"], source=doc["source"],
                page_start=best["page_start"], page_end=best["page_end"],
                char_start=parent.get("char_start"), char_end=parent.get("char_end"),
                propositions=[{"prop_id": r["prop_id"], "text": r["text"], "score": r["score"]}
                              for r in props],
                boxes=best.get("boxes"),
            ))
        else:
            doc = documents[parent["doc_id"]]
            results.append(SearchResult(
                text=parent["text"], score=entry["score"], level="chunk",
                doc_id=parent["doc_id"], chunk_id=chunk_id, prop_id=None,
                chunk_text=parent["text"], header=parent["header"], section=parent["section"],
                title=doc["title"], source=doc["source"], page_start=parent["page_start"],
                page_end=parent["page_end"], char_start=parent["char_start"],
                char_end=parent["char_end"],
                propositions=[{"prop_id": r["prop_id"], "text": r["text"], "score": r["score"]}
                              for r in props],
                boxes=parent.get("boxes"),
            ))
    return results
