"""VectorMatrix's inverted file: how many lists it builds, which it probes, what it finds."""

from __future__ import annotations

import numpy as np

from propdex.resident import vectors
from propdex.resident.vectors import VectorMatrix


def embedding_like(rows: int, seed: int, dim: int = 384) -> np.ndarray:
    """Vectors whose energy lies mostly in a few directions, as text embeddings' does."""
    rng = np.random.default_rng(seed)
    mixing = np.random.default_rng(0).standard_normal((48, dim)).astype(np.float32)
    return (rng.standard_normal((rows, 48)).astype(np.float32) @ mixing
            + 5.5 * rng.standard_normal((rows, dim)).astype(np.float32))


def clustered_embedding_like(rows: int, seed: int) -> np.ndarray:
    """Embedding-like vectors gathered around 300 topics, as a corpus's sentences are."""
    topics = embedding_like(300, seed=100)
    return (topics[np.random.default_rng(seed).integers(0, 300, rows)]
            + 0.5 * embedding_like(rows, seed))


def test_the_best_lists_are_probed_until_they_hold_the_rows_wanted():
    scores = np.array([0.1, 0.9, 0.5, 0.7], dtype=np.float32)
    sizes = np.array([10, 5, 5, 5])
    assert [1, 3] == vectors._lists_to_probe(scores, sizes, rows=8).tolist()


def test_no_more_than_max_probes_lists_are_probed():
    scores = np.random.default_rng(1).standard_normal(1_000).astype(np.float32)
    sizes = np.ones(1_000, dtype=np.int64)
    assert vectors._MAX_PROBES == len(vectors._lists_to_probe(scores, sizes, rows=1_000))


def test_a_large_matrix_has_four_lists_per_square_root_of_its_rows():
    matrix = VectorMatrix(np.random.default_rng(2).standard_normal((60_000, 16)).astype(np.float32))
    assert round(4 * 60_000 ** 0.5) == len(matrix._centroids)


def test_a_search_probes_ten_rows_per_square_root_of_the_matrix_rows():
    matrix = VectorMatrix(np.random.default_rng(3).standard_normal((60_000, 16)).astype(np.float32))
    assert round(10 * 60_000 ** 0.5) == matrix._probed_rows


def test_a_sketched_matrix_is_clustered_on_its_sketch_coordinates():
    matrix = VectorMatrix(embedding_like(60_000, seed=4))
    assert (True, vectors.SKETCH_DIMS) == (matrix._rotation is not None,
                                           matrix._centroids.shape[1])


def test_a_sketched_ivf_search_finds_a_planted_row_first():
    rows = embedding_like(60_000, seed=5)
    query = rows[4_321].copy()  # the matrix takes its vectors over (rotated in place)
    found, _ = VectorMatrix(rows).search(query, 10)
    assert 4_321 == int(found[0])


def test_a_sketched_ivf_search_finds_the_exact_neighbours():
    rows = clustered_embedding_like(60_000, seed=6)
    approximate, exact = VectorMatrix(rows.copy()), VectorMatrix(rows.copy(), exact=True)
    queries = clustered_embedding_like(40, seed=7)
    found = [len(set(approximate.search(q, 10)[0]) & set(exact.search(q, 10)[0]))
             for q in queries]
    assert True is (sum(found) / (10 * len(queries)) >= 0.98)


def test_an_exact_matrix_returns_the_best_rows_by_cosine():
    rows = embedding_like(60_000, seed=8)
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    query = embedding_like(1, seed=9)[0]
    expected = np.argsort(-(unit @ (query / np.linalg.norm(query))), kind="stable")[:10]
    found, _ = VectorMatrix(rows, exact=True).search(query, 10)
    assert expected.tolist() == found.tolist()


def test_k_means_assigns_in_batches_as_in_one_product(monkeypatch):
    rng = np.random.default_rng(10)
    rows = rng.standard_normal((1_000, 8)).astype(np.float32)
    centroids = rng.standard_normal((50, 8)).astype(np.float32)
    monkeypatch.setattr(vectors, "_ASSIGN_SCORES", 50 * 7)  # batches of 7 rows
    assert np.argmax(rows @ centroids.T, axis=1).tolist() == vectors._nearest(
        rows, centroids).tolist()
