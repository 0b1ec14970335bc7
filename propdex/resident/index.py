"""The resident index: the live rows of an index held in memory for a long-running reader.

Why: a search through LanceDB costs 10-40 ms of CPU per query it runs, and the default
search runs four, so on two cores the service could not answer 32 concurrent clients in a
quarter second (bench/RESULTS.md, issue 13). Held in memory, the same rankings cost a few
matrix products and array lookups.

How it stays current: when a commit, a failure record or a removal wrote a new version of
the documents table, the documents whose committed run changed are re-read, as one new
segment, and their old rows are masked out. A view is immutable and consistent in itself
(its documents snapshot and its rows belong together): nobody sees a half-applied commit or
an uncommitted run. Segments are merged afterwards by a background thread
(propdex.resident.merging). When the refresh happens is ``refresh_seconds``:

- 0: each ``view()`` asks LanceDB for the documents table's version (a tenth of a
  millisecond) and, after a commit, refreshes before it returns (callers that saw the new
  version wait for it): a search that starts after a commit sees it.
- above 0 (what the service uses): a background thread polls the version every
  POLL_SECONDS (a stat of the table's folder, LanceDB only when it moved or now and then:
  propdex.store.version_watch) and refreshes at most once per ``refresh_seconds``;
  ``view()`` returns the latest view and never waits. A refresh after one commit costs
  about 30 ms of CPU at 100k propositions (reading through pylance, propdex.resident.fragments;
  74-102 ms through LanceDB, growing as writers left fragments), most of it making the new
  view, so refreshing at each commit of a writer committing as fast as it can would take a
  large share of a core from the searches (32 clients beside a writer, when a refresh cost
  35-130 ms: 71 requests/s, 113-123 coalesced; bench/RESULTS.md).
  So a commit is searchable within POLL_SECONDS when commits are rare and within
  ``refresh_seconds`` under a stream of them -- Lucene's and Elasticsearch's near-real-time
  refresh, for the same reason.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import threading
import time
from functools import partial

import numpy as np
import pyarrow as pa

from propdex.resident.fragments import NewRuns, TableDataset, documents_rows, of_runs
from propdex.resident.merging import merge_plan, merged_segment, swapped
from propdex.resident.segment import Segment, vector_matrix
from propdex.resident.view import ResidentView, TableState
from propdex.search import CHUNK_COLUMNS, PROP_COLUMNS
from propdex.store.index import Index
from propdex.store.live import LiveDocuments, LiveDocumentsCache
from propdex.store.schema import CHUNKS, DOCUMENTS, PRIMARY_KEYS, PROPOSITIONS, VECTOR
from propdex.store.version_watch import VersionWatch

COLUMNS = {PROPOSITIONS: [*PROP_COLUMNS, VECTOR], CHUNKS: [*CHUNK_COLUMNS, VECTOR]}
POLL_SECONDS = 0.1  # how often the background refresher asks for the documents version

logger = logging.getLogger("propdex")


class ResidentIndex:
    """Live rows of ``index`` in memory, as a ResidentView per documents-table version.
    ``exact`` searches every vector (the reference for measuring the IVF's recall)."""

    def __init__(self, index: Index, *, exact: bool = False, refresh_seconds: float = 0.0):
        if refresh_seconds < 0:
            raise ValueError(f"refresh_seconds must be 0 or more, not {refresh_seconds}")
        self.index = index
        self.exact = exact
        self.refresh_seconds = refresh_seconds
        self._view = ResidentView(LiveDocuments(None), {name: TableState() for name in COLUMNS})
        # Refreshes read through pylance (propdex.resident.fragments): the documents table
        # at each new version, and only the fragments of the other tables not read before.
        self._documents = TableDataset(index, DOCUMENTS)
        self._live = LiveDocumentsCache(self._documents.latest_version,
                                        partial(documents_rows, self._documents))
        self._new_runs = {name: NewRuns(index, name) for name in COLUMNS}
        self._refresh = threading.Lock()
        self._merger: threading.Thread | None = None
        self._refresher: threading.Thread | None = None
        self._closed = threading.Event()
        self.last_refresh_seconds: float | None = None  # CPU-bound wall time of the last one
        self.last_refresh_at: float | None = None  # time.time() when it finished
        self.refreshes = 0

    def rankings(self) -> ResidentView:
        """What propdex.search ranks with: the latest view."""
        return self.view()

    def view(self) -> ResidentView:
        """The latest view. The first call loads every live row. After that, with
        ``refresh_seconds`` 0, a caller that sees a newer documents version waits for the
        refresh (its own or another caller's), so a search that starts after a commit returns
        that commit's results; otherwise the background refresher keeps it current."""
        current = self._view
        if current.version is not None and self.refresh_seconds:
            return current
        if self._live.get().version == current.version:
            return current
        self._refresh_now()
        return self._view

    def whole_table_reads(self) -> dict[str, int]:
        """Per table, the runs refreshes read from the whole table, not found whole in the
        fragments appended since the last refresh (propdex.resident.fragments)."""
        return {name: reads.whole_table_reads for name, reads in self._new_runs.items()}

    def close(self) -> None:
        """Stop the background refresher (the merging thread ends with its merge)."""
        self._closed.set()
        if self._refresher is not None:
            self._refresher.join()

    def _refresh_now(self) -> None:
        """Bring the view to the latest documents version (unless another caller just did)."""
        with self._refresh:
            current = self._view
            while True:  # until no commit lands between a snapshot and its row versions
                snapshot = self._live.get()
                if snapshot.version == current.version:
                    return
                versions = self._row_versions(snapshot)
                if versions is not None:
                    break
            started = time.perf_counter()
            self._view = _updated(self.index, self._new_runs, current, snapshot, versions,
                                  self.exact)
            self.last_refresh_seconds = time.perf_counter() - started
            self.last_refresh_at = time.time()
            self.refreshes += 1
            if current.version is None:
                _release_freed_memory()
            self._merge_in_background()
            if self.refresh_seconds and self._refresher is None:  # after the first load
                self._refresher = threading.Thread(target=self._refresh_forever, daemon=True,
                                                   name="propdex-resident-refresh")
                self._refresher.start()

    def _row_versions(self, snapshot: LiveDocuments) -> dict[str, int | None] | None:
        """Index.row_versions through pylance: the versions of the chunks and propositions
        tables that hold every live row of ``snapshot``, or None when a commit landed after
        it (that method says why)."""
        versions = {name: reads.dataset.latest_version() for name, reads in self._new_runs.items()}
        return versions if self._documents.latest_version() == snapshot.version else None

    def _refresh_forever(self) -> None:
        """Poll the documents version; refresh when it moved, at most once per
        ``refresh_seconds`` (commits that land meanwhile are brought in together)."""
        last = time.monotonic()
        # A stat of the documents table's folder says when asking LanceDB can be skipped.
        watch = VersionWatch(self.index.versions_folder(DOCUMENTS))
        while not self._closed.wait(min(POLL_SECONDS, self.refresh_seconds)):
            try:
                if not watch.needs_asking():
                    continue
                version = self._live.get().version
                watch.asked()
                if version == self._view.version:
                    continue
                if self._closed.wait(max(0.0, last + self.refresh_seconds - time.monotonic())):
                    return
                last = time.monotonic()
                self._refresh_now()
            except Exception:  # the current view stays served; the next poll retries
                logger.exception("refreshing the resident index failed")

    def wait_for_merges(self, timeout: float | None = None) -> None:
        """Return once no background merge is under way (tests and benchmarks)."""
        merger = self._merger
        if merger is not None:
            merger.join(timeout)

    def _merge_in_background(self) -> None:
        """Start the merging thread unless it runs (it looks at the latest view each time)."""
        if self._merger is None or not self._merger.is_alive():
            merger = threading.Thread(target=self._merge_all, daemon=True,
                                      name="propdex-resident-merge")
            merger.start()
            # Published once started: wait_for_merges, on another thread, joins it.
            self._merger = merger

    def _merge_all(self) -> None:
        try:
            while self._merge_once():
                pass
        except Exception:  # the rows stay searchable unmerged; the next refresh retries
            logger.exception("merging the resident index's segments failed")

    def _merge_once(self) -> bool:
        """Build one merge per table that needs one from the current view, then swap the
        merged segments into the view current by then. Returns whether it merged."""
        base = self._view
        plans = {name: plan for name, state in base.tables.items()
                 if (plan := merge_plan(state)) is not None}
        if not plans:
            return False
        built = {name: merged_segment(base.tables[name], *plan, key=PRIMARY_KEYS[name],
                                      exact=self.exact) for name, plan in plans.items()}
        with self._refresh:
            current = self._view
            gone = _gone(base.snapshot, current.snapshot)
            tables = dict(current.tables)
            for name, (start, end) in plans.items():
                # Only this thread replaces segments and refreshes append after them, so the
                # merged ones are still in place (checked all the same: a swap must be exact).
                if current.tables[name].segments[:end] == base.tables[name].segments[:end]:
                    tables[name] = swapped(current.tables[name], start, end, built[name], gone)
            self._view = ResidentView(current.snapshot, tables)
        return True


def _updated(index: Index, new_runs: dict[str, NewRuns], view: ResidentView,
             snapshot: LiveDocuments, versions: dict[str, int | None],
             exact: bool) -> ResidentView:
    """``view`` brought to ``snapshot``: rows of runs no longer live masked, the new live
    runs read (at ``versions``, Index.row_versions) as one segment per table (merged later,
    in the background)."""
    before, after = view.snapshot.runs, snapshot.runs
    gone = _gone(view.snapshot, snapshot)
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
        version = versions[name]
        if new and version is not None:
            if before:
                rows = new_runs[name].read(new, snapshot.documents, version, COLUMNS[name])
                # A copy: the segment normalizes its vectors in place, and these are Arrow's.
                vectors = vector_matrix(rows.column(VECTOR)).copy()
                rows = rows.drop_columns([VECTOR])
            else:
                rows, vectors = _all_live_rows(index, name, new, version)
                new_runs[name].saw(version)
            if rows.num_rows:
                segments.append(Segment(rows, vectors, key=PRIMARY_KEYS[name], exact=exact))
                alive.append(np.ones(rows.num_rows, dtype=bool))
        tables[name] = TableState.of(segments, alive)
    return ResidentView(snapshot, tables)


def _gone(before: LiveDocuments, after: LiveDocuments) -> list[str]:
    """Documents whose committed run in ``before`` is no longer the live one in ``after``
    (replaced or removed): their rows are masked."""
    return [doc_id for doc_id, run_id in before.runs.items()
            if after.runs.get(doc_id) != run_id]


def _all_live_rows(index: Index, name: str, runs: dict[str, str],
                   version: int) -> tuple[pa.Table, np.ndarray]:
    """A first load: the rows of ``runs`` (doc_id -> committed run_id, every live document)
    in table ``name`` as of ``version``, their columns but the vectors, and the vectors as
    one float32 matrix. Read batch by batch, each batch's vectors copied straight into a
    matrix sized by the row count, so the vectors are held once (at 1M propositions, 1.5 GB),
    not as Arrow data and a copy."""
    columns = [c for c in COLUMNS[name] if c != VECTOR]
    matrix = _Matrix(index.count(name))
    parts = []
    for batch in index.read_batches(name, COLUMNS[name], version=version):
        batch = of_runs(batch, runs)
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
