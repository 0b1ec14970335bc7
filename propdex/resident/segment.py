"""A segment: live rows of one table read at one time, with their vectors and postings.

Segments never change. A commit adds a segment holding the new runs' rows; the rows it
replaces are masked out by the view (propdex.resident.view), and small segments are merged
now and then (propdex.resident.index), so a search visits a handful of them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from propdex.resident.text import TextPostings
from propdex.resident.vectors import IVF_THRESHOLD, VectorMatrix
from propdex.store.schema import FTS_COLUMN


class Segment:
    """Rows (an Arrow table without the vectors), their VectorMatrix and TextPostings."""

    def __init__(self, rows: pa.Table, vectors: np.ndarray, *, key: str, exact: bool = False):
        # One chunk per column: taking rows from LanceDB's ~100 batches costs 1.4 ms per
        # 100 rows, from one 0.08 ms (100k propositions), and a search takes rows six times.
        self.table = rows.combine_chunks()
        self.key = key  # chunk_id or prop_id
        texts = self.table.column(FTS_COLUMN).to_pylist()
        if len(vectors) < IVF_THRESHOLD:
            self.vectors = VectorMatrix(vectors, exact=exact)
            self.text = TextPostings(texts)
        else:
            # The inverted file's k-means is BLAS (outside the GIL) and the postings are
            # Python: built side by side they overlap on two cores.
            with ThreadPoolExecutor(1, thread_name_prefix="propdex-ivf") as pool:
                building = pool.submit(VectorMatrix, vectors, exact=exact)
                self.text = TextPostings(texts)
                self.vectors = building.result()
        self.rows = self.table.num_rows
        encoded = pc.dictionary_encode(self.table.column("doc_id")).combine_chunks()
        self.doc_codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
        self.doc_names: list[str] = encoded.dictionary.to_pylist()
        order = np.argsort(self.doc_codes, kind="stable")
        bounds = np.searchsorted(self.doc_codes[order], np.arange(len(self.doc_names) + 1))
        self.rows_of_doc = {name: order[bounds[code]:bounds[code + 1]]
                            for code, name in enumerate(self.doc_names)}
        # Chunks have no grades: every row counts as passed.
        self.passed = (self.table.column("passed").fill_null(False).to_numpy(zero_copy_only=False)
                       if "passed" in self.table.column_names else np.ones(self.rows, bool))
        # Built now for chunks, whose ids search looks up (parents of proposition hits);
        # a proposition's id is never looked up.
        self._positions: dict[str, list[int]] | None = None
        if key == "chunk_id":
            self.positions_of("")

    def positions_of(self, key_value: str) -> list[int]:
        """Row positions holding ``key_value`` in the key column (built on first use)."""
        if self._positions is None:
            positions: dict[str, list[int]] = {}
            for position, value in enumerate(self.table.column(self.key).to_pylist()):
                positions.setdefault(value, []).append(position)
            self._positions = positions
        return self._positions.get(key_value, [])

    def documents_mask(self, doc_ids: list[str]) -> np.ndarray:
        """Rows belonging to any of ``doc_ids``."""
        mask = np.zeros(self.rows, dtype=bool)
        for doc_id in doc_ids:
            rows = self.rows_of_doc.get(doc_id)
            if rows is not None:
                mask[rows] = True
        return mask


def vector_matrix(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A fixed-size-list vector column as a (rows, dim) float32 matrix."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros((0, array.type.list_size), dtype=np.float32)
    values = array.flatten().to_numpy(zero_copy_only=False)
    return values.astype(np.float32, copy=False).reshape(len(array), array.type.list_size)
