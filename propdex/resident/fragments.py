"""The reads a refresh makes, through pylance (propdex.store.datasets).

Why: each refresh of a resident index beside an ingest reads the documents table and one or
two documents' chunk and proposition rows. Through a LanceDB query each read costs at least
6 ms of CPU and one document's 10 rows 12-36 ms (planning, LanceDB's runtime threads), on
the core the searches share; pylance reads the documents table in 3 ms and the fragment a
commit appended in about 1 ms (bench/RESULTS.md, 2026-11-26).

A commit appends its rows as new fragments (Lance never reuses a fragment id), so the rows of
the runs a refresh brings in are mostly in the fragments it has not read yet. Mostly: rows
appended before an earlier refresh whose run committed only after it sit in fragments that
refresh already saw, and a compaction moves rows into new fragments. So each run's rows are
counted against the counts its documents row states (Index.replace_document checks them),
and the runs that come up short are read from the whole table, as without fragments.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from propdex.errors import StorageError
from propdex.store import predicates as p
from propdex.store.datasets import open_dataset, read_rows
from propdex.store.index import Index
from propdex.store.live import LIVE_COLUMNS
from propdex.store.schema import CHUNKS, PROPOSITIONS

# The documents row's count of each table's rows per run.
ROW_COUNTS = {CHUNKS: "chunk_count", PROPOSITIONS: "proposition_count"}
MAX_IN_LIST = 1_000  # documents per doc_id IN (...) read; more read the table and filter


class TableDataset:
    """One table of an index as a pylance dataset, checked out at the version asked for."""

    def __init__(self, index: Index, name: str):
        self.index = index
        self.name = name
        self._dataset: Any = None

    def latest_version(self) -> int | None:
        """The table's latest version (None: no table yet): a look at its newest manifest,
        0.02 ms of CPU against 0.34 through LanceDB's table.version."""
        dataset = self._opened()
        return None if dataset is None else dataset.latest_version

    def at(self, version: int) -> Any:
        """The dataset as of ``version`` (opened once, then checked out: a manifest read)."""
        if self._opened() is None:
            raise StorageError(f"the index at {self.index.uri} has no {self.name} table")
        if self._dataset.version != version:
            self._dataset = self._dataset.checkout_version(version)
        return self._dataset

    def _opened(self) -> Any:
        """The dataset, opened (at its latest version) on first use; None: no table yet."""
        if self._dataset is None:
            self._dataset = open_dataset(self.index.uri, self.name,
                                         storage_options=self.index.storage_options)
        return self._dataset

    def read(self, version: int, columns: Sequence[str], where: str | None = None,
             fragments: Iterable[Any] | None = None) -> pa.Table:
        """Rows as of ``version`` (propdex.store.datasets.read_rows)."""
        return read_rows(self.at(version), columns, where, fragments=fragments)


def documents_rows(dataset: TableDataset, version: int) -> list[dict]:
    """Every documents row with LIVE_COLUMNS as of ``version`` (LiveDocumentsCache's read)."""
    return dataset.read(version, LIVE_COLUMNS).to_pylist()


class NewRuns:
    """The rows of newly committed runs in one table (chunks or propositions), read from the
    fragments a refresh has not seen, and from the whole table for the runs they lack."""

    def __init__(self, index: Index, name: str):
        if name not in ROW_COUNTS:
            raise ValueError(f"no row count is kept for table {name!r}")
        self.dataset = TableDataset(index, name)
        self.count_column = ROW_COUNTS[name]
        self._seen: set[int] = set()  # fragment ids as of the last version read
        self.whole_table_reads = 0  # runs not found whole in new fragments (tests, benchmarks)

    def saw(self, version: int | None) -> None:
        """Every row as of ``version`` was read (a first load): later reads skip them."""
        self._seen = set() if version is None else fragment_ids(self.dataset.at(version))

    def read(self, runs: dict[str, str], documents: dict[str, dict], version: int,
             columns: Sequence[str]) -> pa.Table:
        """The rows of ``runs`` (doc_id -> committed run_id) as of ``version``;
        ``documents``: their documents rows (the counts)."""
        dataset = self.dataset.at(version)
        fragments = dataset.get_fragments()
        fresh = [f for f in fragments if f.fragment_id not in self._seen]
        where = p.in_list("doc_id", runs) if len(runs) <= MAX_IN_LIST else None
        rows = of_runs(self.dataset.read(version, columns, where, fresh), runs) if fresh \
            else None
        found = Counter(rows.column("doc_id").to_pylist()) if rows is not None else Counter()
        short = {doc_id: run_id for doc_id, run_id in runs.items()
                 if found[doc_id] != documents.get(doc_id, {}).get(self.count_column)}
        if short:
            self.whole_table_reads += len(short)
            if rows is not None:
                rows = rows.filter(pc.invert(pc.is_in(rows.column("doc_id"),
                                                      value_set=pa.array(list(short)))))
            where = p.in_list("doc_id", short) if len(short) <= MAX_IN_LIST else None
            whole = of_runs(self.dataset.read(version, columns, where), short)
            rows = whole if rows is None else pa.concat_tables([rows, whole])
        self._seen = {f.fragment_id for f in fragments}  # once the reads went through
        return rows if rows is not None else no_rows(dataset.schema, columns)


def fragment_ids(dataset: Any) -> set[int]:
    return {f.fragment_id for f in dataset.get_fragments()}


def of_runs(rows: pa.Table | pa.RecordBatch, runs: dict[str, str]) -> Any:
    """The rows whose (doc_id, run_id) is one of ``runs``."""
    wanted = pa.array([f"{doc_id}\x00{run_id}" for doc_id, run_id in runs.items()])
    pairs = pc.binary_join_element_wise(rows.column("doc_id"), rows.column("run_id"), "\x00")
    return rows.filter(pc.is_in(pairs, value_set=wanted))


def no_rows(schema: pa.Schema, columns: Sequence[str]) -> pa.Table:
    """Zero rows with ``columns`` typed as stored (null-typed where the table lacks one)."""
    stored = set(schema.names)
    return pa.table({c: pa.array([], schema.field(c).type if c in stored else pa.null())
                     for c in columns})
