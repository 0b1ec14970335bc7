"""Retrieval metrics over one ranking of units (Dense X Retrieval §4.3 and §6.2).

- Passage level: units are ranked by cosine similarity, each mapped to its parent chunk,
  and a chunk takes the rank of its best unit (the first occurrence in unit order), so a
  chunk scores the maximum over its units. Recall@k: a relevant chunk is among the first
  k chunks. Reciprocal rank: 1 / rank of the first relevant chunk (0 when none is ranked).
- Word budget: the units' own text (not their parents) is concatenated in rank order and
  cut after ``l`` words; a hit when the answer (or an evidence span) occurs in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from propdex.evaluation.matching import contains_normalised, normalise


def rank_units(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Row indices of ``vectors`` by descending dot product with ``query`` (ties keep row
    order, so a ranking is the same on every run)."""
    if len(vectors) == 0:
        return np.zeros(0, dtype=np.int64)
    scores = vectors @ np.asarray(query, dtype=np.float32)
    return np.argsort(-scores, kind="stable")


def parent_ranking(order: Iterable[int], parents: Sequence[str]) -> list[str]:
    """Parent chunk ids in the order their first unit appears in ``order``."""
    return list(dict.fromkeys(parents[i] for i in order))


def recall_at_k(ranked: Sequence[str], relevant: set[str] | frozenset[str], k: int) -> bool:
    return any(chunk in relevant for chunk in ranked[:k])


def reciprocal_rank(ranked: Sequence[str], relevant: set[str] | frozenset[str]) -> float:
    for rank, chunk in enumerate(ranked, start=1):
        if chunk in relevant:
            return 1.0 / rank
    return 0.0


def word_count(text: str) -> int:
    return len(text.split())


def first_words(texts: Iterable[str], limit: int) -> str:
    """The texts concatenated in order and cut after ``limit`` whitespace-separated words."""
    taken: list[str] = []
    for text in texts:
        taken.extend(text.split()[: limit - len(taken)])
        if len(taken) >= limit:
            break
    return " ".join(taken)


def answer_found(text: str, answer: str, evidence: Sequence[str] = ()) -> bool:
    """Whether the answer or any evidence span occurs in ``text`` (normalised matching)."""
    haystack = normalise(text)
    return any(contains_normalised(haystack, normalise(needle)) for needle in (answer, *evidence))


def budget_hits(texts: Sequence[str], budgets: Iterable[int], answer: str,
                evidence: Sequence[str] = ()) -> dict[int, bool]:
    """For each word budget l: the answer or evidence is within the first l words."""
    return {budget: answer_found(first_words(texts, budget), answer, evidence)
            for budget in budgets}


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return float(sum(values) / len(values)) if values else 0.0
