"""Cosine search over a matrix of vectors held in memory: exact, or IVF above a size.

Measured on this project's 2-core machine (OpenBLAS through NumPy): a matrix-vector product
over 100,000 x 384 float32 vectors takes about 2.5 ms, and 32 slices of 1,000 vectors 1.5 ms.
So a matrix up to IVF_THRESHOLD rows is searched exactly, and a larger one through an
inverted file: k-means centroids (sqrt(rows) of them), rows stored sorted by their nearest
centroid, and a query scans the rows of its NPROBES nearest centroids. Scores are cosine
similarities computed exactly (dot product over both norms), as LanceDB's cosine distance is.
"""

from __future__ import annotations

import numpy as np

IVF_THRESHOLD = 50_000
NPROBES = 40  # the same probes as LanceDB's IVF_FLAT in propdex (store/index.py)
_KMEANS_ITERATIONS = 6
_SAMPLE_PER_CENTROID = 32
_ASSIGN_BATCH = 65_536  # rows per matrix product while assigning: 65k x 1000 floats = 256 MB


class VectorMatrix:
    """Immutable: the vectors of one segment of rows, searchable by cosine similarity."""

    def __init__(self, vectors: np.ndarray, *, exact: bool = False, seed: int = 0):
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be a 2-d matrix, got shape {vectors.shape}")
        norms = np.linalg.norm(vectors, axis=1)
        norms[norms == 0] = 1.0  # a zero vector scores 0 against everything, never NaN
        self.rows = len(vectors)
        self.dim = vectors.shape[1]
        if exact or self.rows < IVF_THRESHOLD:
            self._order: np.ndarray | None = None
            self._vectors = vectors
            self._norms = norms
            return
        centroids = _kmeans(vectors, norms, round(self.rows ** 0.5), seed)
        assignment = _nearest(vectors, centroids)
        # Rows sorted by centroid: each centroid's rows are one contiguous slice.
        self._order = np.argsort(assignment, kind="stable")
        self._vectors = vectors[self._order]
        self._norms = norms[self._order]
        self._centroids = centroids
        self._bounds = np.searchsorted(assignment[self._order], np.arange(len(centroids) + 1))

    @property
    def approximate(self) -> bool:
        return self._order is not None

    def in_row_order(self) -> np.ndarray:
        """The vectors as given (row positions in the order they were built from)."""
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
        query_norm = float(np.linalg.norm(query)) or 1.0
        if self._order is None:
            scores = (self._vectors @ query) / (self._norms * query_norm)
            return _top(np.arange(self.rows), scores, limit, keep)
        nearest = np.argsort(-(self._centroids @ query))[:NPROBES]
        slices = [slice(self._bounds[c], self._bounds[c + 1]) for c in nearest]
        positions = np.concatenate([np.arange(s.start, s.stop) for s in slices])
        scores = np.concatenate([(self._vectors[s] @ query) / (self._norms[s] * query_norm)
                                 for s in slices])
        rows = self._order[positions]
        return _top(rows, scores, limit, keep)


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


def _kmeans(vectors: np.ndarray, norms: np.ndarray, clusters: int, seed: int) -> np.ndarray:
    """Spherical k-means centroids (unit length) trained on a sample of the rows."""
    rng = np.random.default_rng(seed)
    sample_size = min(len(vectors), clusters * _SAMPLE_PER_CENTROID)
    picked = np.sort(rng.choice(len(vectors), sample_size, replace=False))
    sample = vectors[picked] / norms[picked, None]
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
    """Index of each row's nearest centroid by cosine: centroids are unit length, so for
    one row the largest dot product is the largest cosine, without normalising the rows."""
    assignment = np.empty(len(vectors), dtype=np.int32)
    for start in range(0, len(vectors), _ASSIGN_BATCH):
        block = vectors[start:start + _ASSIGN_BATCH]
        assignment[start:start + len(block)] = np.argmax(block @ centroids.T, axis=1)
    return assignment
