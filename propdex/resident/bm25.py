"""The best rows of one segment for a query by BM25, from the postings of the query's terms.

The formula's parts are propdex.resident.analyzer's; this is the scoring loop over a segment,
kept apart from the view that gathers the statistics it needs.
"""

from __future__ import annotations

import numpy as np

from propdex.resident.analyzer import BM25_K1

# bm25_saturated's (K1 + 1), the factor of every idf (a per-term scalar here).
_SCALE = np.float32(BM25_K1) + np.float32(1.0)


def top_bm25(row_count: int, lists: list[tuple[np.ndarray, np.ndarray]], idf: np.ndarray,
             length_norm: np.ndarray, allowed: np.ndarray | None, limit: int, *,
             excluded: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows in ascending order, BM25 scores) of the ``limit`` best ``allowed`` rows (None:
    any) holding any of the terms; among rows tied at the last place, the lowest rows.

    ``excluded`` (sorted row positions) are left out too, but after scoring rather than
    from the postings: for a few masked rows of a large segment (the rows of replaced
    documents), which would otherwise cost a mask lookup and three copies per posting."""
    # Every term's postings at once (a Python loop of a fancy-indexed add per term took a
    # third more time on long queries; 1.7x the time on the benchmark's, 17 terms and 43k
    # postings at 100k rows): a row's share of each term, summed per row in the query's term
    # order and in float32, as LanceDB sums them. np.add.at into float32 took 2.5 ms where
    # np.bincount (float64) took 5.8 at 1M rows and 430k postings, and reading the scores
    # back at the postings 1.35 ms instead of 2.2.
    rows = np.concatenate([term_rows for term_rows, _ in lists])
    frequencies = np.concatenate([term_frequencies for _, term_frequencies in lists])
    # analyzer.bm25_saturated, idf * (K1 + 1) * tf / (tf + length norm), in its order of
    # float32 operations (so the same bits) with the idf's factor taken per term and the
    # arrays updated in place: 0.30 ms instead of 0.37 for the benchmark's queries at 100k
    # rows (medians of 15 alternating rounds on the 2-core AVX2 EPYC); tests/test_bm25.py
    # holds it to bm25_saturated.
    shares = np.repeat(np.asarray(idf, dtype=np.float32) * _SCALE,
                       [len(term_rows) for term_rows, _ in lists])
    longest = max((term_rows for term_rows, _ in lists), key=len)
    if allowed is not None:
        kept = allowed[rows]
        rows, frequencies, shares = rows[kept], frequencies[kept], shares[kept]
        longest = longest[allowed[longest]]
    if not len(rows) or limit < 1:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
    denominators = np.take(length_norm, rows)
    denominators += frequencies
    shares *= frequencies
    shares /= denominators
    scores = np.zeros(row_count, dtype=np.float32)
    np.add.at(scores, rows, shares)
    if excluded is not None and len(excluded):
        # Scores are never negative: at 0, an excluded row is below any floor above 0 and
        # counts as the lowest in the longest term's (so the floor is that of the others).
        scores[excluded] = 0
    # The rows of one term are distinct rows holding a term, so the limit-th best of them
    # is a floor of the limit-th best row: the candidates are the rows scoring at least that
    # much, found by one pass over the scores (median 196 rows for the benchmark's queries
    # at 100k rows, limit 100). This took 0.13 ms per query where an argpartition of every
    # posting's score (~43k, rows repeated) for the best limit x terms then np.unique took
    # 0.41 (both timed per query, side by side, on the 2-core AVX2 EPYC).
    # Without that floor (a short longest list, or a floor of 0 that rows holding no term
    # would pass too) every row holding a term is one.
    floor = 0.0
    if len(longest) >= limit:
        floor = np.partition(scores[longest], len(longest) - limit)[len(longest) - limit]
    if floor > 0:
        candidates = np.flatnonzero(scores >= floor).astype(rows.dtype)
    else:
        candidates = np.unique(rows)
        if excluded is not None and len(excluded):
            candidates = np.setdiff1d(candidates, excluded, assume_unique=True)
    best = scores[candidates]
    # The limit best; of the rows tied at the last place, the lowest (as the view's _best
    # orders ties), so a search is repeatable and independent of how this selects.
    if len(candidates) > limit:
        last = np.partition(best, len(candidates) - limit)[len(candidates) - limit]
        chosen = best > last
        ties = np.flatnonzero(best == last)[:limit - np.count_nonzero(chosen)]
        chosen[ties] = True
        candidates, best = candidates[chosen], best[chosen]
    return candidates, best
