"""Index upkeep: the full-text, scalar and IVF_FLAT vector indexes, compaction, and how a
vector index is partitioned and probed."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from propdex.store.schema import CHUNKS, DOCUMENTS, META, PROPOSITIONS, VECTOR
from propdex.store.tables import Tables

# Below this many rows a table is searched exactly (flat); from it on optimize() builds an
# IVF_FLAT index. IVF_FLAT: its distances are exact (no refine step) and it builds in seconds
# where graph indexes took minutes for less recall. The threshold is low because a flat search
# reads every vector of the table on each query, and the default search runs a vector search
# on each table (bench/bench_search.py and bench/RESULTS.md give the figures).
VECTOR_INDEX_THRESHOLD = 5_000
# Rows per partition when the index is trained. Not sqrt(rows): LanceDB's optimize() (run
# after every ingest that wrote) re-partitions an index whose partitions are small, and the
# index it writes then is searched through every partition, while partitions this large are
# kept through rounds of replacements.
VECTOR_INDEX_ROWS_PER_PARTITION = 2_048
# Probes: enough partitions to hold this many rows, or this share of the rows trained on,
# what keeps recall@10 against exact search near 0.98 at 100k and 1M propositions.
VECTOR_INDEX_SCAN_ROWS = 20_000
VECTOR_INDEX_SCAN_SHARE = 0.1
VECTOR_INDEX_NPROBES = 40  # an index of an older propdex (named without its partitions)
# optimize() only appends new rows to the trained partitions, so they grow with the table;
# once it holds this many times the rows the index was trained on, the index is re-trained.
VECTOR_INDEX_RETRAIN_GROWTH = 4
VECTOR_INDEX_NAME = re.compile(r"vector_ivf_flat_(\d+)_p(\d+)")
# Scalar indexes optimize() keeps, for the filters searches and writers run: a document
# scope prefilters ``passed = true``, which without a bitmap index scans the whole column;
# each proposition hit fetches its parent chunk by id, a scan of the chunks table without the
# B-tree; a replacement deletes a document's old rows, and reads its live rows, by doc_id.
# A metadata filter (propdex.metadata) is ``array_has_all(meta, ...)``, answered by a
# label-list index instead of reading every row's list. While an ingest with another
# embedder re-embeds the index, a vector search keeps to rows of its own model
# (``embed_model IN (...)``): a few values, a bitmap.
_SCALAR_INDEXES: dict[str, dict[str, str]] = {  # column -> lancedb.index class
    CHUNKS: {"chunk_id": "BTree", "doc_id": "BTree", META: "LabelList",
             "embed_model": "Bitmap"},
    PROPOSITIONS: {"passed": "Bitmap", "doc_id": "BTree", META: "LabelList",
                   "embed_model": "Bitmap"},
}

# Every commit writes its documents row anew (merge_insert: a fragment holding the new row,
# the old one marked deleted), and every search after a commit reads the whole table for its
# live documents, at a cost that grows with the fragments; so a writer compacts the table
# once it has this many, instead of leaving it to the optimize() at the end of an ingest run.
DOCUMENTS_COMPACTION_FRAGMENTS = 16


class Maintenance(Tables):
    """optimize() and the indexes it keeps."""

    vector_index_threshold: int

    def _compact_documents_when_fragmented(self) -> None:
        """Compact the documents table once it holds DOCUMENTS_COMPACTION_FRAGMENTS
        fragments (a commit or failure record just wrote one)."""
        table = self.table(DOCUMENTS)
        if table is None:
            return
        with self._storage("read the statistics of the documents table"):
            fragments = table.stats()["fragment_stats"]["num_fragments"]
        if fragments < DOCUMENTS_COMPACTION_FRAGMENTS:
            return
        with self._hold_tables():
            self._write("compact the documents table", lambda: table.optimize())

    # Maintenance -----------------------------------------------------------------------
    def optimize(self, vector_index_threshold: int | None = None,
                 cleanup_older_than: timedelta | None = None) -> dict[str, str]:
        """Fold new rows into the full-text indexes, compact small fragments, and build a
        vector index on a table once it holds ``vector_index_threshold`` rows (below that,
        search stays exact). Returns what was done per table."""
        threshold = vector_index_threshold or self.vector_index_threshold
        done: dict[str, str] = {}
        for name in (DOCUMENTS, CHUNKS, PROPOSITIONS):
            table = self.table(name)
            if table is None:
                continue
            with self._hold_tables():
                if name != DOCUMENTS:
                    self._ensure_fts(table, name)
                # Compaction plus an incremental update of every index over the new rows;
                # a no-op (no new version) when there is nothing to do.
                self._write(f"optimize {name}",
                            lambda table=table: table.optimize(
                                cleanup_older_than=cleanup_older_than))
                actions = ["optimized"]
                for column in _SCALAR_INDEXES.get(name, {}):
                    if self._ensure_scalar_index(table, name, column):
                        actions.append(f"built the {column} index")
                if name != DOCUMENTS:
                    action = self._train_vector_index(table, name, threshold)
                    if action:
                        actions.append(action)
            done[name] = ", ".join(actions)
        return done

    def _ensure_scalar_index(self, table: Any, name: str, column: str) -> bool:
        """Build the scalar index _SCALAR_INDEXES names for ``column`` once; optimize()
        folds new rows into it afterwards. Returns whether it was built now."""
        if any(i.columns == [column] for i in table.list_indices()):
            return False
        import lancedb.index

        config = getattr(lancedb.index, _SCALAR_INDEXES[name][column])()
        self._write(f"build the {column} index of {name}",
                    lambda: table.create_index(column, config=config, replace=True))
        return True

    def _train_vector_index(self, table: Any, name: str, threshold: int) -> str | None:
        """Train the IVF_FLAT index once the table reaches ``threshold`` rows, and re-train it
        once the table has grown VECTOR_INDEX_RETRAIN_GROWTH times past the rows it was
        trained on (kept in the index name). Returns what was done, or None."""
        rows = self._count(table, None)
        current = [i for i in table.list_indices() if VECTOR in i.columns and i.index_type != "FTS"]
        if current:
            trained = VECTOR_INDEX_NAME.fullmatch(current[0].name)
            # An index of another kind or name (an older propdex) is replaced at once.
            if trained and rows < VECTOR_INDEX_RETRAIN_GROWTH * int(trained.group(1)):
                return None
        elif rows < threshold:
            return None
        from lancedb.index import IvfFlat

        partitions = vector_index_partitions(rows)
        config = IvfFlat(distance_type="cosine", num_partitions=partitions)
        index_name = f"vector_ivf_flat_{rows}_p{partitions}"

        def train() -> None:
            table.create_index(VECTOR, config=config, replace=True, name=index_name)
            for old in current:
                if old.name != index_name:
                    table.drop_index(old.name)

        self._write(f"build the vector index of {name}", train)
        verb = "re-trained" if current else "built"
        return f"{verb} IVF_FLAT vector index ({partitions} partitions) over {rows} rows"

    def has_vector_index(self, name: str) -> bool:
        table = self.table(name)
        return table is not None and _has_vector_index(table)


def _has_vector_index(table: Any) -> bool:
    return probes_of_indices(table.list_indices()) is not None


def vector_index_partitions(rows: int) -> int:
    """Partitions of an IVF_FLAT index trained on ``rows`` rows (VECTOR_INDEX_ROWS_PER_PARTITION
    each, at least two)."""
    return max(2, rows // VECTOR_INDEX_ROWS_PER_PARTITION)


def vector_index_probes(rows: int, partitions: int) -> int:
    """Partitions a search of an index trained on ``rows`` rows in ``partitions`` probes: as
    many as hold VECTOR_INDEX_SCAN_ROWS rows, or VECTOR_INDEX_SCAN_SHARE of them if more."""
    wanted = max(VECTOR_INDEX_SCAN_ROWS, VECTOR_INDEX_SCAN_SHARE * rows)
    return max(1, min(partitions, math.ceil(wanted * partitions / max(rows, 1))))


def probes_of_indices(indices: Iterable[Any]) -> int | None:
    """The probes a search of a table with ``indices`` (LanceDB IndexConfigs) uses through its
    vector index (None: it has none)."""
    for index in indices:
        if VECTOR in index.columns and index.index_type != "FTS":
            trained = VECTOR_INDEX_NAME.fullmatch(index.name)
            if trained is None:  # an older propdex's index, until optimize() replaces it
                return VECTOR_INDEX_NPROBES
            return vector_index_probes(int(trained.group(1)), int(trained.group(2)))
    return None
