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

from propdex.resident.columns import Columns
from propdex.resident.text import TextPostings
from propdex.resident.vectors import IVF_THRESHOLD, VectorMatrix
from propdex.store.ranking import RANKING_KEYS
from propdex.store.schema import FTS_COLUMN


class Segment:
    """Rows (an Arrow table without the vectors), their VectorMatrix and TextPostings."""

    def __init__(self, rows: pa.Table, vectors: np.ndarray, *, key: str, exact: bool = False,
                 text: TextPostings | None = None):
        """``text``: the postings of the rows' texts when they are known already (a merge's,
        TextPostings.merged); analyzed from the rows when None."""
        # One chunk per column: taking rows from LanceDB's ~100 batches costs 1.4 ms per
        # 100 rows, from one 0.08 ms (100k propositions), and a search takes rows six times.
        self.table = rows.combine_chunks()
        if text is not None or len(vectors) < IVF_THRESHOLD:
            self.vectors = VectorMatrix(vectors, exact=exact)
            self.text = text if text is not None else TextPostings(self._texts())
        else:
            # The inverted file's k-means is BLAS (outside the GIL) and the postings are
            # Python: built side by side they overlap on two cores.
            with ThreadPoolExecutor(1, thread_name_prefix="propdex-ivf") as pool:
                building = pool.submit(VectorMatrix, vectors, exact=exact)
                self.text = TextPostings(self._texts())
                self.vectors = building.result()
        self.rows = self.table.num_rows
        self.columns = Columns(self.table)  # what a search's results read of their rows
        # The ranking keys dictionary-encoded, once: the rows of each document, the keys as
        # Python values and the parent chunk numbers below all read these.
        encoded = {name: pc.dictionary_encode(self.table.column(name)).combine_chunks()
                   for name in RANKING_KEYS if name in self.table.column_names}
        documents = encoded["doc_id"]
        codes = documents.indices.to_numpy(zero_copy_only=False)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(documents.dictionary) + 1))
        self.rows_of_doc = {name: order[bounds[code]:bounds[code + 1]]
                            for code, name in enumerate(documents.dictionary.to_pylist())}
        # Chunks have no grades: every row counts as passed.
        self.passed = (self.table.column("passed").fill_null(False).to_numpy(zero_copy_only=False)
                       if "passed" in self.table.column_names else np.ones(self.rows, bool))
        # The ranking keys as Python values, each distinct value one object: every ranked
        # row is made of them, and taking 100 rows of five Arrow columns and converting them
        # was a fifth of a served search's CPU under 32 clients (100k propositions).
        self.keys = {name: _python_values(values) for name, values in encoded.items()}
        # Each row's parent chunk as a number, the same for rows of the same chunk_id:
        # search groups a ranking's rows by parent chunk on these, and makes Python values
        # only of the groups it keeps (ResidentView.ranked_groups).
        self.parents = encoded["chunk_id"].indices.fill_null(-1) \
            .to_numpy(zero_copy_only=False).astype(np.int64)
        # Row positions by id, for chunks only: search looks up the parent chunks of
        # proposition hits by id, and never a proposition.
        self._positions: dict[str, list[int]] = {}
        if key == "chunk_id":
            for position, value in enumerate(self.table.column(key).to_pylist()):
                self._positions.setdefault(value, []).append(position)

    def _texts(self) -> list[str | None]:
        return self.table.column(FTS_COLUMN).to_pylist()

    def positions_of(self, chunk_id: str) -> list[int]:
        """Row positions holding ``chunk_id`` (a segment of chunks)."""
        return self._positions.get(chunk_id, [])

    def documents_mask(self, doc_ids: list[str]) -> np.ndarray:
        """Rows belonging to any of ``doc_ids``."""
        mask = np.zeros(self.rows, dtype=bool)
        for doc_id in doc_ids:
            rows = self.rows_of_doc.get(doc_id)
            if rows is not None:
                mask[rows] = True
        return mask


def _python_values(encoded: pa.DictionaryArray) -> np.ndarray:
    """A dictionary-encoded column as a NumPy object array of Python values, repeated
    values sharing one object (at 1M propositions its doc_id, run_id and chunk_id hold 10k,
    a few and 100k distinct values)."""
    distinct = np.array(encoded.dictionary.to_pylist() + [None], dtype=object)
    codes = encoded.indices.fill_null(len(encoded.dictionary))
    return distinct[codes.to_numpy(zero_copy_only=False)]


def vector_matrix(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A fixed-size-list vector column as a (rows, dim) float32 matrix."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros((0, array.type.list_size), dtype=np.float32)
    values = array.flatten().to_numpy(zero_copy_only=False)
    return values.astype(np.float32, copy=False).reshape(len(array), array.type.list_size)
