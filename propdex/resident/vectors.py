"""Cosine search over a matrix of vectors held in memory: exact, or IVF above a size.

Measured on this project's 2-core machine (OpenBLAS through NumPy): a matrix-vector product
over 100,000 x 384 float32 vectors takes about 2.5 ms, and 32 slices of 1,000 vectors 1.5 ms.
So a matrix up to IVF_THRESHOLD rows is searched exactly, and a larger one through an
inverted file: k-means centroids (sqrt(rows) of them), rows stored sorted by their nearest
centroid, and a query scans the rows of its nearest centroids (PROBE_SHARE of them). Rows and
queries are scaled to unit length, so a dot product is the cosine similarity LanceDB's cosine
distance gives (to float32 rounding).
"""

from __future__ import annotations

import math

import numpy as np

IVF_THRESHOLD = 50_000
# Lists probed per query: 6% of them, at least 32 (at 100k rows 32 of 316, at 1M 60 of
# 1,000). Recall@10 of the served search against exact search, 100 queries at 100k / 60 at
# 1M (bench/bench_serve.py's recall_at_k): 4% / 16 gave 0.97 for the propositions-vector
# search at 100k; 8% / 32 gave 0.991 (default search 0.998), and 5% / 32 at 1M 1.000.
PROBE_SHARE = 0.06
MIN_PROBES = 32
_KMEANS_ITERATIONS = 6
_SAMPLE_PER_CENTROID = 32
_ASSIGN_BATCH = 65_536  # rows per matrix product while assigning: 65k x 1000 floats = 256 MB


class VectorMatrix:
    """Immutable: the vectors of one segment of rows, searchable by cosine similarity.
    It takes ``vectors`` over: they are scaled to unit length in place (a copy of 1M
    vectors would be another 1.5 GB while the index loads)."""

    def __init__(self, vectors: np.ndarray, *, exact: bool = False, seed: int = 0):
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be a 2-d matrix, got shape {vectors.shape}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0  # a zero vector scores 0 against everything, never NaN
        vectors /= norms
        self.rows = len(vectors)
        self.dim = vectors.shape[1]
        self._order: np.ndarray | None = None
        self._vectors = vectors
        if exact or self.rows < IVF_THRESHOLD:
            return
        centroids = _kmeans(vectors, round(self.rows ** 0.5), seed)
        assignment = _nearest(vectors, centroids)
        # Rows sorted by centroid: each centroid's rows are one contiguous slice.
        self._order = np.argsort(assignment, kind="stable")
        self._vectors = vectors[self._order]
        self._centroids = centroids
        self._bounds = np.searchsorted(assignment[self._order], np.arange(len(centroids) + 1))
        self._probes = min(len(centroids), max(MIN_PROBES, math.ceil(PROBE_SHARE
                                                                     * len(centroids))))

    @property
    def approximate(self) -> bool:
        return self._order is not None

    def in_row_order(self) -> np.ndarray:
        """The (unit) vectors in the order of the rows they were built from."""
        if self._order is None:
            return self._vectors
        vectors = np.empty_like(self._vectors)
        vectors[self._order] = self._vectors
        return vectors

    def search(self, query: np.ndarray, limit: int, keep: np.ndarray | None = None,
               ) -> tuple[np.ndarray, np.ndarray]:
        """(row positions, cosine similarities) of the ``limit`` best rows, best first.
        ``keep`` is a boolean mask over rows; rows outside it are never returned."""
        query = np.asarray(query, dtype=np.float32)
        if query.shape != (self.dim,):
            raise ValueError(f"query vector has shape {query.shape}; the index holds "
                             f"{self.dim}-dimensional vectors")
        query = query / (np.linalg.norm(query) or np.float32(1.0))
        if self._order is None:
            return _top(np.arange(self.rows), self._vectors @ query, limit, keep)
        nearest = np.argpartition(-(self._centroids @ query), self._probes - 1)[:self._probes]
        starts, ends = self._bounds[nearest], self._bounds[nearest + 1]
        lengths = ends - starts
        # Positions of every probed row, slice after slice, without a Python loop.
        offsets = np.cumsum(lengths) - lengths
        positions = np.arange(int(lengths.sum())) + np.repeat(starts - offsets, lengths)
        scores = np.empty(len(positions), dtype=np.float32)
        for start, end, offset in zip(starts.tolist(), ends.tolist(), offsets.tolist()):
            np.matmul(self._vectors[start:end], query, out=scores[offset:offset + end - start])
        return _top(self._order[positions], scores, limit, keep)


def _top(rows: np.ndarray, scores: np.ndarray, limit: int, keep: np.ndarray | None,
         ) -> tuple[np.ndarray, np.ndarray]:
    if keep is not None:
        kept = keep[rows]
        rows, scores = rows[kept], scores[kept]
    if len(rows) > limit:
        best = np.argpartition(-scores, limit - 1)[:limit]
        rows, scores = rows[best], scores[best]
    # Ties broken by row position, so a search is repeatable.
    order = np.lexsort((rows, -scores))
    return rows[order], scores[order]


def _kmeans(unit_vectors: np.ndarray, clusters: int, seed: int) -> np.ndarray:
    """Spherical k-means centroids (unit length) trained on a sample of the rows."""
    rng = np.random.default_rng(seed)
    sample_size = min(len(unit_vectors), clusters * _SAMPLE_PER_CENTROID)
    sample = unit_vectors[np.sort(rng.choice(len(unit_vectors), sample_size, replace=False))]
    centroids = sample[rng.choice(sample_size, clusters, replace=False)].copy()
    for _ in range(_KMEANS_ITERATIONS):
        assignment = np.argmax(sample @ centroids.T, axis=1)
        counts = np.bincount(assignment, minlength=clusters)
        order = np.argsort(assignment, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        empty = counts == 0
        # Per-cluster sums of the sorted rows (reduceat over each cluster's slice; an empty
        # cluster's slot gets a stray row and is overwritten below).
        sums = np.add.reduceat(sample[order], np.minimum(starts, sample_size - 1), axis=0)
        # An empty cluster is restarted on a random sample row rather than left dead.
        sums[empty] = sample[rng.choice(sample_size, int(empty.sum()), replace=False)]
        centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return centroids.astype(np.float32)


def _nearest(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of each row's nearest centroid by cosine (rows and centroids are unit length)."""
    assignment = np.empty(len(vectors), dtype=np.int32)
    for start in range(0, len(vectors), _ASSIGN_BATCH):
        block = vectors[start:start + _ASSIGN_BATCH]
        assignment[start:start + len(block)] = np.argmax(block @ centroids.T, axis=1)
    return assignment
