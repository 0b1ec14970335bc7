"""Cosine search over a matrix of vectors held in memory: exact, or IVF above a size.

Measured on this project's 2-core machine (OpenBLAS through NumPy): a matrix-vector product
over 100,000 x 384 float32 vectors takes about 2.5 ms, and 32 slices of 1,000 vectors 1.5 ms.
So a matrix up to IVF_THRESHOLD rows is searched exactly, and a larger one through an
inverted file: LISTS_PER_SQRT x sqrt(rows) k-means centroids, rows stored sorted by their
nearest centroid, and a query scans the lists of its nearest centroids, nearest first, until
they hold PROBED_ROWS_PER_SQRT x sqrt(rows) rows. Rows and queries are scaled to unit length,
so a dot product is the cosine similarity LanceDB's cosine distance gives (to float32
rounding).

A search reads its vectors from memory, not cache (the probed rows of a 100k matrix are 19 MB,
beside an ingest even the 10k chunk vectors are), so its cost is the bytes it reads. A matrix
of SKETCH_MIN_ROWS rows or more is therefore held rotated onto its principal axes (a rotation
keeps every dot product), most variance first: a first pass scores the rows on the first
SKETCH_DIMS coordinates alone, a third of the bytes, and the best RERANK_FACTOR x limit of
them are scored again on all coordinates, which decide the result. The sketch coordinates
are held apart from the others, contiguous: at 1M rows, scanning 60 slices of 1,000 rows read
128 of 384 coordinates per row in 5.9 ms, and the same coordinates stored apart in 3.4 ms.
"""

from __future__ import annotations

import numpy as np

from propdex.resident.ranges import slice_positions

# Below, an exact scan. In one process, searching one matrix after another, the 10k chunks
# of bench/bench_serve.py's 100k index searched no faster through an IVF (400 lists, 1,015
# of 10,000 rows probed: 0.36 against 0.37 ms, timed alternately as below) at recall@10
# 0.987 instead of 1.000. In the service it is otherwise: between two searches its clients,
# sockets and the other tables push the chunks' 5 MB sketch out of the cache, and the exact
# scan was 12% of a served search (py-spy). With this threshold (50,000 before), two
# services over the 100k index, 32 clients each in alternating 6 s windows: 6.10 -> 5.28 ms
# of CPU per request (medians of 8), 166 -> 192 requests/s, p95 250 -> 210 ms; again in a
# slower phase 6.83 -> 6.15 ms. The default search's recall@10 against exact search: 0.997
# -> 0.992 (100 queries).
IVF_THRESHOLD = 8_192
# Many small lists, probed by the rows they hold rather than by count: the lists a query
# lands on are the large ones, and small lists let it stop near the rows it needs. Measured
# on the 2-core AVX2 EPYC against VectorMatrix(exact=True), the MiniLM vectors of
# bench/bench_serve.py's indexes, 200 queries, one BLAS thread, variants built in one
# process and timed alternately (medians of 9 rounds, 7 at 1M): at 100k propositions,
# sqrt(rows) lists with 32 probes scanned 12,438 rows per query; 4 x sqrt(rows) lists probed
# to 10 x sqrt(rows) rows scan 3,234 at recall@10 0.994 -> 0.999, recall@100 0.988 -> 0.985,
# and a propositions search (limit 100) took 1.31 -> 0.60 ms. At 1M propositions: 79,704 ->
# 10,302 rows, 10.2 -> 1.9 ms at recall@10 0.998 and recall@100 0.981 both; its 100k chunks
# (limit 60) 10,898 -> 3,235 rows, 1.67 -> 0.75 ms at recall@10 0.983 -> 0.990. The price is
# at build: four times the centroids took the 1M matrix from 27 to 51 s of CPU on one thread
# (k-means on the sketch already). The served search's recall@10 against
# ResidentIndex(exact=True) (100 of the bench queries): default 0.998 -> 0.997 at 100k,
# 0.996 -> 0.995 at 1M; propositions-vector 0.990 -> 0.997 and 0.986 -> 0.986.
LISTS_PER_SQRT = 4
PROBED_ROWS_PER_SQRT = 10
_MAX_PROBES = 160  # a bound on the lists probed: four times the 40 lists of average size
_KMEANS_ITERATIONS = 6
_SAMPLE_PER_CENTROID = 32  # 16 lost recall@10 at 100k: 0.999 -> 0.994
_ASSIGN_SCORES = 1 << 26  # scores per matrix product while assigning: 64M floats = 256 MB
# Measured on bench/bench_serve.py's 100k index, 100 held-out queries, one BLAS thread, side
# by side: 128 of 384 MiniLM coordinates hold 67% of the propositions' variance; re-scoring
# 4x the wanted rows, a propositions search (100 rows, through the IVF) took 0.77 -> 0.53 ms
# at recall@100 0.991 -> 0.985 against exact search, a chunks search (60 of 10k rows, no
# IVF) 0.20 -> 0.15 ms at 1.000 -> 0.997. Beside an ingest, where the rows come from memory
# rather than cache, the bytes saved count for more.
SKETCH_DIMS = 128
SKETCH_MIN_ROWS = 4_096  # below, a scan is cheap and the rotation's 384 x 384 eigh is not
# The sketch is used only when its coordinates hold this share of the rows' energy: text
# embeddings concentrate it (MiniLM: 0.67), vectors spread evenly over every axis do not,
# and a sketch of them would pick the wrong candidates.
MIN_SKETCH_SHARE = 0.6
RERANK_FACTOR = 4
RERANK_MIN = 64
_ROTATION_SAMPLE = 16_384
_ROTATE_BATCH = 16_384  # rows per matrix product while rotating: 16k x 384 floats = 24 MB


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
        # Rows and queries are rotated by it (None: no first pass on a sketch).
        self._rotation: np.ndarray | None = None
        if not exact and self.rows >= SKETCH_MIN_ROWS and self.dim >= 2 * SKETCH_DIMS:
            axes, share = _principal_axes(vectors, seed)
            if share >= MIN_SKETCH_SHARE:
                _rotate(vectors, axes, out=vectors)
                self._rotation = axes
        if not exact and self.rows >= IVF_THRESHOLD:
            # Clustered on the sketch when there is one: a third of the work, and the lists
            # to probe are chosen on the sketch, as the rows in them are scored.
            clustered = vectors if self._rotation is None else vectors[:, :SKETCH_DIMS]
            centroids = _kmeans(clustered, round(LISTS_PER_SQRT * self.rows ** 0.5), seed)
            assignment = _nearest(clustered, centroids)
            # Rows sorted by centroid: each centroid's rows are one contiguous slice.
            self._order = np.argsort(assignment, kind="stable")
            self._centroids = centroids
            self._bounds = np.searchsorted(assignment[self._order],
                                           np.arange(len(centroids) + 1))
            self._sizes = np.diff(self._bounds)
            self._probed_rows = round(PROBED_ROWS_PER_SQRT * self.rows ** 0.5)
        rows = slice(None) if self._order is None else self._order
        # The first pass's matrix (the sketch, or every coordinate) and, with a sketch, the
        # other coordinates: together one copy of the vectors, in searched (centroid) order.
        self._rest: np.ndarray | None = None
        if self._rotation is None:
            self._first: np.ndarray = vectors if self._order is None else vectors[rows]
        else:
            self._first = np.ascontiguousarray(vectors[rows, :SKETCH_DIMS])
            self._rest = np.ascontiguousarray(vectors[rows, SKETCH_DIMS:])

    @property
    def approximate(self) -> bool:
        return self._order is not None or self._rotation is not None

    def in_row_order(self) -> np.ndarray:
        """The (unit) vectors in the order of the rows they were built from."""
        vectors = self._first if self._rest is None else np.hstack((self._first, self._rest))
        if self._order is not None:
            ordered = vectors
            vectors = np.empty_like(ordered)
            vectors[self._order] = ordered
        if self._rotation is not None:  # back from the principal axes
            out = vectors if vectors is not self._first else np.empty_like(vectors)
            vectors = _rotate(vectors, np.ascontiguousarray(self._rotation.T), out=out)
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
        if self._rotation is not None:
            query = query @ self._rotation
        # The first pass reads SKETCH_DIMS coordinates of each row when rotated, all if not.
        first = query[:self._first.shape[1]]
        if self._order is None:
            positions = np.arange(self.rows)
            scores = self._first @ first
        else:
            nearest = _lists_to_probe(self._centroids @ query[:self._centroids.shape[1]],
                                      self._sizes, self._probed_rows)
            starts, ends = self._bounds[nearest], self._bounds[nearest + 1]
            positions, offsets = slice_positions(starts, ends)  # of every probed row
            scores = np.empty(len(positions), dtype=np.float32)
            # np.dot with a positional out: the same BLAS call as np.matmul, about 1.3 us
            # less per list (30 lists of 100 rows: 110 instead of 149 us, hot in cache).
            dot, matrix = np.dot, self._first
            for start, end, offset in zip(starts.tolist(), ends.tolist(), offsets.tolist(), strict=False):
                dot(matrix[start:end], first, scores[offset:offset + end - start])
        rows = positions if self._order is None else self._order[positions]
        if self._rotation is None:
            return _top(rows, scores, limit, keep)
        if keep is not None:
            kept = keep[rows]
            positions, rows, scores = positions[kept], rows[kept], scores[kept]
        wanted = max(RERANK_FACTOR * limit, RERANK_MIN)
        if len(scores) > wanted:
            best = np.argpartition(-scores, wanted - 1)[:wanted]
            positions, rows, scores = positions[best], rows[best], scores[best]
        # The sketch's share of each cosine is already known: add the other coordinates'.
        return _top(rows, scores + self._rest[positions] @ query[len(first):], limit, None)


def _lists_to_probe(scores: np.ndarray, sizes: np.ndarray, rows: int) -> np.ndarray:
    """The lists of the best ``scores``, best first, until they hold ``rows`` rows (the list
    that reaches it included), at most _MAX_PROBES of them."""
    candidates = np.argpartition(-scores, _MAX_PROBES - 1)[:_MAX_PROBES] \
        if len(scores) > _MAX_PROBES else np.arange(len(scores))
    candidates = candidates[np.argsort(-scores[candidates], kind="stable")]
    count = int(np.searchsorted(np.cumsum(sizes[candidates]), rows)) + 1
    return candidates[:count]


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


def _kmeans(vectors: np.ndarray, clusters: int, seed: int) -> np.ndarray:
    """Spherical k-means centroids (unit length) trained on a sample of the rows (unit
    vectors, or the sketch coordinates of unit vectors)."""
    rng = np.random.default_rng(seed)
    sample_size = min(len(vectors), clusters * _SAMPLE_PER_CENTROID)
    sample = vectors[np.sort(rng.choice(len(vectors), sample_size, replace=False))]
    centroids = sample[rng.choice(sample_size, clusters, replace=False)].copy()
    for _ in range(_KMEANS_ITERATIONS):
        assignment = _nearest(sample, centroids)
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
    """Index of each row's nearest centroid (unit length) by dot product: by cosine for unit
    rows, and spherical k-means' assignment for sketches of them."""
    assignment = np.empty(len(vectors), dtype=np.int32)
    # Bounded in scores, not rows: 4,000 centroids (1M rows) would make 65k rows 1 GB.
    batch = max(1, _ASSIGN_SCORES // len(centroids))
    for start in range(0, len(vectors), batch):
        block = vectors[start:start + batch]
        assignment[start:start + len(block)] = np.argmax(block @ centroids.T, axis=1)
    return assignment


def _principal_axes(unit_vectors: np.ndarray, seed: int) -> tuple[np.ndarray, float]:
    """An orthonormal (dim, dim) rotation whose columns are the principal axes of a sample
    of the rows (about the origin: cosine search has no mean), most energy first, and the
    share of the energy the first SKETCH_DIMS of them hold."""
    rng = np.random.default_rng(seed)
    size = min(len(unit_vectors), _ROTATION_SAMPLE)
    sample = unit_vectors[np.sort(rng.choice(len(unit_vectors), size, replace=False))]
    sample = sample.astype(np.float64)  # an orthonormal basis to float64 precision
    energy, axes = np.linalg.eigh(sample.T @ sample)  # ascending
    energy = energy[::-1]
    share = float(energy[:SKETCH_DIMS].sum() / energy.sum()) if energy.sum() > 0 else 0.0
    return np.ascontiguousarray(axes[:, ::-1], dtype=np.float32), share


def _rotate(vectors: np.ndarray, rotation: np.ndarray, *, out: np.ndarray) -> np.ndarray:
    """``vectors @ rotation`` into ``out`` (which may be ``vectors``), a batch at a time."""
    for start in range(0, len(vectors), _ROTATE_BATCH):
        out[start:start + _ROTATE_BATCH] = vectors[start:start + _ROTATE_BATCH] @ rotation
    return out
