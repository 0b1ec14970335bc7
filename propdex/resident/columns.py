"""Python values of a segment's columns at a few row positions, read from the Arrow buffers.

A search reads the texts, pages and offsets of the 20-40 rows its results are made of. Arrow's
``Table.take(...).to_pylist()`` costs a compute call per column and a dict per row whatever the
row count: 84-160 microseconds for 15 propositions (3 columns) and 154-285 for 10 chunks (10
columns), three to four times per served search. Sliced straight from the buffers (string
offsets and values, NumPy views of the numbers) the same values took 30-63 and 71-128
microseconds (measured alternately on the 2-core AVX2 EPYC, 100k-proposition bench index).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa


class Columns:
    """Immutable: readers of every string, integer, floating-point, boolean and list column of
    ``table`` (one chunk per column, as a Segment holds it)."""

    def __init__(self, table: pa.Table):
        self._readers: dict[str, _Strings | _Numbers | _Values] = {}
        for name in table.column_names:
            column = table.column(name)
            array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
            kind = array.type
            if pa.types.is_string(kind) or pa.types.is_large_string(kind):
                self._readers[name] = _Strings(array)
            elif (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                  or pa.types.is_boolean(kind)):
                self._readers[name] = _Numbers(array)
            elif not pa.types.is_fixed_size_list(kind):  # the vectors are held elsewhere
                self._readers[name] = _Values(array)

    def values(self, name: str, positions: Sequence[int]) -> list:
        """The values of column ``name`` at ``positions`` (None where null)."""
        return self._readers[name].values(np.asarray(positions, dtype=np.int64))

    def rows(self, names: Sequence[str], positions: Sequence[int]) -> list[dict]:
        """One dict per position with the ``names`` columns, as Table.take().to_pylist()."""
        at = np.asarray(positions, dtype=np.int64)
        values = [self._readers[name].values(at) for name in names]
        return [dict(zip(names, row, strict=False)) for row in zip(*values, strict=False)]


class _Strings:
    """A (large) string array's offsets as NumPy and its UTF-8 bytes as a memoryview."""

    def __init__(self, array: pa.Array):
        offsets = np.int64 if pa.types.is_large_string(array.type) else np.int32
        _, offset_buffer, data = array.buffers()
        self._offsets = np.frombuffer(offset_buffer, dtype=offsets)[
            array.offset:array.offset + len(array) + 1]
        self._data = memoryview(data) if data is not None else memoryview(b"")
        self._valid = _validity(array)

    def values(self, at: np.ndarray) -> list[str | None]:
        data = self._data
        texts = [str(data[start:end], "utf-8") for start, end in
                 zip(self._offsets[at].tolist(), self._offsets[at + 1].tolist(), strict=False)]
        return _with_nulls(texts, self._valid, at)


class _Numbers:
    """A numeric or boolean array as NumPy (nulls filled, and remembered)."""

    def __init__(self, array: pa.Array):
        self._valid = _validity(array)
        filled = array if self._valid is None else array.fill_null(False if pa.types.is_boolean(
            array.type) else 0)
        self._values = filled.to_numpy(zero_copy_only=False)

    def values(self, at: np.ndarray) -> list:
        return _with_nulls(self._values[at].tolist(), self._valid, at)


class _Values:
    """Any other column (the page boxes: lists of structs; a column an older index lacks:
    nulls) through Arrow's take: only results read it, a few rows per search."""

    def __init__(self, array: pa.Array):
        self._array = array

    def values(self, at: np.ndarray) -> list:
        return self._array.take(pa.array(at)).to_pylist()


def _validity(array: pa.Array) -> np.ndarray | None:
    """Which rows hold a value; None when all do."""
    return None if array.null_count == 0 else array.is_valid().to_numpy(zero_copy_only=False)


def _with_nulls(values: list, valid: np.ndarray | None, at: np.ndarray) -> list:
    if valid is None:
        return values
    return [value if ok else None for value, ok in zip(values, valid[at].tolist(), strict=False)]
