"""The resident index: the live rows of an index held in memory for a long-running reader.

Why: a search through LanceDB costs 10-40 ms of CPU per query it runs, and the default
search runs four, so on two cores the service could not answer 32 concurrent clients in a
quarter second (bench/RESULTS.md, issue 13). Held in memory, the same rankings cost a few
matrix products and array lookups.

How it stays current: each ``view()`` asks LanceDB for the documents table's version (a
tenth of a millisecond). When a commit, a failure record or a removal wrote a new version,
the documents whose committed run changed are re-read, as one new segment, and their old
rows are masked out (20-30 ms of CPU per commit at 100k propositions). One caller refreshes;
callers that saw the new version wait for it, and searches already under way finish on the
view they started with, which is consistent in itself (its documents snapshot and its rows
belong together): nobody sees a half-applied commit or an uncommitted run, and a search that
starts after a commit sees it.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from propdex.resident.segment import Segment, vector_matrix
from propdex.resident.view import ResidentView, TableState
from propdex.search import CHUNK_COLUMNS, PROP_COLUMNS
from propdex.store import predicates as p
from propdex.store.index import Index
from propdex.store.live import LiveDocuments
from propdex.store.schema import CHUNKS, PRIMARY_KEYS, PROPOSITIONS, VECTOR

COLUMNS = {PROPOSITIONS: [*PROP_COLUMNS, VECTOR], CHUNKS: [*CHUNK_COLUMNS, VECTOR]}
# Segments beyond the first before the small ones are merged into one: each costs a search
# a matrix product and a few lookups, and a long-running service sees a commit per document.
MAX_SEGMENTS = 8
# The first (large) segment is rebuilt with the rest once fewer than this share of its rows
# is live: masked rows still cost memory and scan time.
MIN_LIVE_SHARE = 0.5
_MAX_IN_LIST = 1_000  # documents per doc_id IN (...) read; more read the table and filter


class ResidentIndex:
    """Live rows of ``index`` in memory, as a ResidentView per documents-table version.
    ``exact`` searches every vector (the reference for measuring the IVF's recall)."""

    def __init__(self, index: Index, *, exact: bool = False):
        self.index = index
        self.exact = exact
        self._view = ResidentView(LiveDocuments(None), {name: TableState() for name in COLUMNS})
        self._refresh = threading.Lock()
        self.last_refresh_seconds: float | None = None

    def rankings(self) -> ResidentView:
        """What propdex.search ranks with: the latest view."""
        return self.view()

    def view(self) -> ResidentView:
        """The latest view, refreshed first when the index changed since the current one.
        A caller that sees a newer version waits for the refresh (its own or another
        caller's): a search that starts after a commit returns that commit's results."""
        current = self._view
        snapshot = self.index.live_documents()
        if snapshot.version == current.version:
            return current
        with self._refresh:
            current = self._view
            snapshot = self.index.live_documents()
            if snapshot.version != current.version:
                started = time.perf_counter()
                self._view = _updated(self.index, current, snapshot, self.exact)
                self.last_refresh_seconds = time.perf_counter() - started
                if current.version is None:
                    _release_freed_memory()
            return self._view


def _updated(index: Index, view: ResidentView, snapshot: LiveDocuments, exact: bool,
             ) -> ResidentView:
    """``view`` brought to ``snapshot``: rows of runs no longer live masked, the new live
    runs read as one segment per table, small segments merged."""
    before, after = view.snapshot.runs, snapshot.runs
    gone = [doc_id for doc_id, run_id in before.items() if after.get(doc_id) != run_id]
    new = {doc_id: run_id for doc_id, run_id in after.items() if before.get(doc_id) != run_id}
    tables = {}
    for name, state in view.tables.items():
        alive = [mask.copy() for mask in state.alive] if gone else list(state.alive)
        for segment, mask in zip(state.segments, alive, strict=True):
            for doc_id in gone:
                rows = segment.rows_of_doc.get(doc_id)
                if rows is not None:
                    mask[rows] = False
        segments = list(state.segments)
        if new:
            rows, vectors = _live_rows(index, name, new, everything=len(before) == 0)
            if rows.num_rows:
                segments.append(Segment(rows, vectors, key=PRIMARY_KEYS[name], exact=exact))
                alive.append(np.ones(rows.num_rows, dtype=bool))
        segments, alive = _merged(segments, alive, name, exact)
        tables[name] = TableState(tuple(segments), tuple(alive),
                                  tuple(mask & s.passed for s, mask in zip(segments, alive,
                                                                           strict=True)))
    return ResidentView(snapshot, tables)


def _live_rows(index: Index, name: str, runs: dict[str, str], everything: bool,
               ) -> tuple[pa.Table, np.ndarray]:
    """The rows of ``runs`` (doc_id -> committed run_id) in table ``name``: their columns
    but the vectors, and the vectors as one float32 matrix. Read batch by batch; a first
    load copies each batch's vectors straight into a matrix sized by the row count, so the
    vectors are held once (at 1M propositions, 1.5 GB), not as Arrow data and a copy."""
    where = None if everything or len(runs) > _MAX_IN_LIST else p.in_list("doc_id", list(runs))
    wanted = pa.array([f"{doc_id}\x00{run_id}" for doc_id, run_id in runs.items()])
    columns = [c for c in COLUMNS[name] if c != VECTOR]
    # Counting costs a scan under a filter: only a whole-table read is sized beforehand.
    matrix = _Matrix(index.count(name) if where is None else 0)
    parts = []
    for batch in index.read_batches(name, COLUMNS[name], where):
        pairs = pc.binary_join_element_wise(batch.column("doc_id"), batch.column("run_id"),
                                            "\x00")
        batch = batch.filter(pc.is_in(pairs, value_set=wanted))
        if batch.num_rows:
            matrix.append(vector_matrix(batch.column(VECTOR)))
            parts.append(batch.select(columns))
    if not parts:
        return pa.table({c: pa.nulls(0) for c in columns}), np.zeros((0, 0), np.float32)
    return pa.Table.from_batches(parts), matrix.rows()


class _Matrix:
    """Vectors appended batch by batch into one preallocated float32 matrix."""

    def __init__(self, capacity: int):
        self._capacity = capacity
        self._data: np.ndarray | None = None
        self._filled = 0

    def append(self, vectors: np.ndarray) -> None:
        if self._data is None or self._filled + len(vectors) > len(self._data):
            # More rows than the count (appended since) or no count: grow by half.
            size = max(self._capacity, self._filled + len(vectors),
                       int(1.5 * (self._filled + len(vectors))) if self._data is not None else 0)
            grown = np.empty((size, vectors.shape[1]), dtype=np.float32)
            if self._data is not None:
                grown[:self._filled] = self._data[:self._filled]
            self._data = grown
        self._data[self._filled:self._filled + len(vectors)] = vectors
        self._filled += len(vectors)

    def rows(self) -> np.ndarray:
        assert self._data is not None
        return self._data[:self._filled]


def _merged(segments: list[Segment], alive: list[np.ndarray], name: str, exact: bool,
            ) -> tuple[list[Segment], list[np.ndarray]]:
    """Merge the small segments into one when there are too many, and everything into one
    when most of the first segment's rows are dead."""
    if not segments:
        return segments, alive
    first_live = alive[0].mean() if len(alive[0]) else 0.0
    if first_live < MIN_LIVE_SHARE:
        start = 0
    elif len(segments) > MAX_SEGMENTS + 1:
        start = 1
    else:
        return segments, alive
    merging = list(zip(segments[start:], alive[start:], strict=True))
    rows = pa.concat_tables([segment.table.filter(pa.array(mask)) for segment, mask in merging])
    vectors = np.concatenate([segment.vectors.in_row_order()[mask]
                              for segment, mask in merging])
    kept_segments, kept_alive = segments[:start], alive[:start]
    if rows.num_rows:
        kept_segments.append(Segment(rows, vectors, key=PRIMARY_KEYS[name], exact=exact))
        kept_alive.append(np.ones(rows.num_rows, dtype=bool))
    return kept_segments, kept_alive


def _release_freed_memory() -> None:
    """Give the memory the first load freed back to the system. The load reads every row
    through Arrow, copies the vectors and tokenizes the texts; glibc keeps those freed
    blocks, so without this the service's RSS stayed at twice what it holds (100k
    propositions: 760 MiB after the load for about 200 MiB of live data)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:  # another C library (musl): nothing to trim with
            pass
