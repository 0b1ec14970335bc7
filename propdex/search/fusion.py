"""Reciprocal rank fusion (k = 60): how propdex.search combines rankings whose scores are
not comparable (cosine similarity and BM25), by rank alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping

RRF_K = 60


def reciprocal_rank_fusion(rankings: list[list[dict]], key: Callable[[dict], str],
                           k: int = RRF_K) -> list[dict]:
    """Fuse rankings (each best first): score = sum of 1 / (k + rank), rank from 1.
    Returns one row per key, best first, with "score" set to the fused score."""
    fused: dict[str, float] = {}
    first_seen: dict[str, dict] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking, start=1):
            row_key = key(row)
            fused[row_key] = fused.get(row_key, 0.0) + 1.0 / (k + rank)
            first_seen.setdefault(row_key, row)
    ordered = sorted(fused, key=lambda rk: -fused[rk])
    return [{**first_seen[rk], "score": fused[rk]} for rk in ordered]


def best_ranks(rankings: list[Mapping[str, list[dict]]]) -> dict[str, int]:
    """chunk_id -> its best (lowest, from 1) position among ``rankings``."""
    best: dict[str, int] = {}
    for ranking in rankings:
        for position, chunk_id in enumerate(ranking, start=1):
            if position < best.get(chunk_id, position + 1):
                best[chunk_id] = position
    return best


def fused_propositions(groups: list[list[dict]]) -> list[dict]:
    """One chunk's propositions from each signal's ranking, fused by RRF within the chunk
    (a vector score and a BM25 score are not comparable; ranks are)."""
    return reciprocal_rank_fusion(groups, key=lambda r: r["prop_id"])
