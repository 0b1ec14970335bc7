"""top_bm25: the best rows of a segment by BM25, against a brute-force sum per row."""

from __future__ import annotations

import numpy as np
import pytest

from propdex.resident.analyzer import bm25_length_norm, bm25_saturated
from propdex.resident.bm25 import top_bm25


def postings(rows: list[int], frequencies: list[float] | None = None):
    frequencies = [1.0] * len(rows) if frequencies is None else frequencies
    return np.array(rows, dtype=np.int32), np.array(frequencies, dtype=np.float32)


def brute_force(row_count, lists, idf, length_norm, allowed, limit):
    """Each term's share added to its rows one term after another, in float32; the ``limit``
    best rows holding a term, the lowest rows first among equal scores; by row."""
    scores = np.zeros(row_count, dtype=np.float32)
    held = np.zeros(row_count, dtype=bool)
    for (rows, frequencies), term_idf in zip(lists, idf, strict=True):
        if allowed is not None:
            rows, frequencies = rows[allowed[rows]], frequencies[allowed[rows]]
        scores[rows] += bm25_saturated(term_idf, frequencies, length_norm[rows])
        held[rows] = True
    rows = np.flatnonzero(held)
    best = np.sort(rows[np.lexsort((rows, -scores[rows]))][:limit]).astype(np.int32)
    return best, scores[best]


def as_lists(result: tuple[np.ndarray, np.ndarray]) -> tuple[list, list]:
    rows, scores = result
    return rows.tolist(), scores.view(np.int32).tolist()  # scores compared bit for bit


def random_query(seed: int, row_count: int, terms: int, distinct_lengths: int):
    """Random postings; few distinct lengths and frequencies make rows tie on their score."""
    rng = np.random.default_rng(seed)
    lists = []
    for _ in range(terms):
        size = int(rng.integers(0, row_count + 1))
        rows = np.sort(rng.choice(row_count, size=size, replace=False)).astype(np.int32)
        lists.append((rows, rng.integers(1, 4, size=size).astype(np.float32)))
    idf = rng.uniform(0.1, 5.0, size=terms).astype(np.float32)
    lengths = rng.integers(1, distinct_lengths + 1, size=row_count)
    length_norm = bm25_length_norm(lengths, float(lengths.mean()))
    return lists, idf, length_norm


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("limit", [1, 5, 40, 1000])
@pytest.mark.parametrize("distinct_lengths", [2, 50])
def test_the_best_rows_are_the_brute_force_best_rows(seed, limit, distinct_lengths):
    lists, idf, length_norm = random_query(seed, 300, 1 + seed % 6, distinct_lengths)
    expected = as_lists(brute_force(300, lists, idf, length_norm, None, limit))
    actual = as_lists(top_bm25(300, lists, idf, length_norm, None, limit))
    assert expected == actual


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("share", [0.02, 0.5, 0.95])
@pytest.mark.parametrize("limit", [3, 40])
def test_an_allowed_mask_keeps_the_best_allowed_rows(seed, share, limit):
    lists, idf, length_norm = random_query(seed, 300, 4, 10)
    allowed = np.random.default_rng(100 + seed).random(300) < share
    expected = as_lists(brute_force(300, lists, idf, length_norm, allowed, limit))
    actual = as_lists(top_bm25(300, lists, idf, length_norm, allowed, limit))
    assert expected == actual


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_a_repeated_term_counts_once_per_occurrence(limit):
    length_norm = np.ones(4, dtype=np.float32)
    term, other = postings([0, 1, 2]), postings([3], [3.0])
    lists, idf = [term, other, term], np.array([1.0, 1.5, 1.0], dtype=np.float32)
    expected = as_lists(brute_force(4, lists, idf, length_norm, None, limit))
    actual = as_lists(top_bm25(4, lists, idf, length_norm, None, limit))
    assert expected == actual


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 1, 0], [1, 2, 0, 1]])
def test_scores_are_summed_in_float32_in_the_query_order(order):
    # Shares of very different sizes: float32 sums depend on the order of the terms.
    shares = [(np.float32(3e6), 1.0), (np.float32(0.3), 1.0), (np.float32(7.77), 2.0)]
    length_norm = np.array([0.5, 1.3], dtype=np.float32)
    lists = [postings([0, 1], [shares[i][1]] * 2) for i in order]
    idf = np.array([shares[i][0] for i in order], dtype=np.float32)
    expected = np.zeros(2, dtype=np.float32)
    for (rows, frequencies), term_idf in zip(lists, idf, strict=True):
        expected[rows] += bm25_saturated(term_idf, frequencies, length_norm[rows])
    actual = top_bm25(2, lists, idf, length_norm, None, 2)
    assert ([0, 1], expected.view(np.int32).tolist()) == as_lists(actual)


@pytest.mark.parametrize("limit", [4, 10, 100])
def test_fewer_rows_than_the_limit_are_all_returned(limit):
    length_norm = np.ones(50, dtype=np.float32)
    lists, idf = [postings([7, 12]), postings([7, 40])], np.ones(2, dtype=np.float32)
    assert [7, 12, 40] == top_bm25(50, lists, idf, length_norm, None, limit)[0].tolist()


@pytest.mark.parametrize("limit, expected", [(1, [2]), (2, [2, 5]), (3, [2, 5, 6]),
                                             (4, [0, 2, 5, 6]), (6, [0, 1, 2, 4, 5, 6])])
def test_the_lowest_rows_win_ties_at_the_last_place(limit, expected):
    # Row 2 scores best, rows 5 and 6 next, rows 0, 1, 4 and 9 tie last.
    length_norm = np.ones(10, dtype=np.float32)
    lists = [postings([0, 1, 2, 4, 5, 6, 9]), postings([2, 5, 6]), postings([2])]
    idf = np.ones(3, dtype=np.float32)
    assert expected == top_bm25(10, lists, idf, length_norm, None, limit)[0].tolist()


def test_a_floor_tied_with_many_rows_yields_the_lowest_of_them():
    # The 20th best row of the long list scores as 497 others of it: all are candidates.
    length_norm = np.ones(1000, dtype=np.float32)
    lists = [postings(list(range(0, 1000, 2))), postings([10, 500, 998])]
    rows, _ = top_bm25(1000, lists, np.ones(2, dtype=np.float32), length_norm, None, 20)
    expected = sorted([10, 500, 998] + [row for row in range(0, 36, 2) if row != 10])
    assert expected == rows.tolist()


@pytest.mark.parametrize("limit", [1, 3])
def test_rows_holding_a_term_of_no_weight_are_still_rows_holding_a_term(limit):
    # An idf of 0 (a term in every document of a huge corpus): shares of 0, yet the rows
    # hold a term, which rows outside every posting list do not.
    length_norm = np.ones(5, dtype=np.float32)
    lists = [postings([1, 3, 4])]
    expected = ([1, 3, 4][:limit], [0] * limit)
    assert expected == as_lists(top_bm25(5, lists, np.zeros(1, np.float32), length_norm,
                                         None, limit))


@pytest.mark.parametrize("allowed", [None, np.zeros(6, dtype=bool)])
def test_no_rows_hold_the_terms(allowed):
    length_norm = np.ones(6, dtype=np.float32)
    lists = [postings([]), postings([2, 3])] if allowed is not None else [postings([])]
    rows, scores = top_bm25(6, lists, np.ones(len(lists), np.float32), length_norm, allowed, 5)
    assert ([], [], np.int32, np.float32) == (rows.tolist(), scores.tolist(), rows.dtype,
                                              scores.dtype)


@pytest.mark.parametrize("limit", [1, 50, 500])
def test_rows_and_scores_are_int32_and_float32_by_row(limit):
    lists, idf, length_norm = random_query(3, 300, 5, 20)
    rows, scores = top_bm25(300, lists, idf, length_norm, None, limit)
    assert (np.int32, np.float32, sorted(rows.tolist())) == (rows.dtype, scores.dtype,
                                                             rows.tolist())


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("limit", [1, 10, 1000])
@pytest.mark.parametrize("excluded_share", [0.01, 0.3])
def test_excluded_rows_are_left_out_as_a_mask_of_allowed_rows_would(seed, limit,
                                                                    excluded_share):
    lists, idf, length_norm = random_query(seed, 300, 1 + seed % 5, 2 + seed % 3 * 20)
    rng = np.random.default_rng(100 + seed)
    excluded = np.sort(rng.choice(300, size=int(300 * excluded_share), replace=False))
    allowed = np.ones(300, dtype=bool)
    allowed[excluded] = False
    expected = as_lists(top_bm25(300, lists, idf, length_norm, allowed, limit))
    actual = as_lists(top_bm25(300, lists, idf, length_norm, None, limit, excluded=excluded))
    assert expected == actual
