"""propdex.resident.columns: values read from the Arrow buffers equal Arrow's own take."""

import pyarrow as pa
import pytest

from propdex.resident.columns import Columns

TABLE = pa.table({
    "text": pa.array(["alpha", "", None, "ünïcödé ✓", "last"]),
    "large": pa.array(["a", None, "bb", "ccc", "dddd"], type=pa.large_string()),
    "page": pa.array([1, 2, None, 4, 5], type=pa.int32()),
    "offset": pa.array([10, 20, 30, 40, 50], type=pa.int64()),
    "passed": pa.array([True, None, False, True, False]),
    "score": pa.array([0.5, 1.5, None, 2.5, 3.5], type=pa.float32()),
})


@pytest.mark.parametrize("positions", [[0], [4, 0, 2], [2, 2, 1], [], [0, 1, 2, 3, 4]])
def test_rows_equal_arrow_take(positions):
    names = TABLE.column_names
    expected = TABLE.take(pa.array(positions, type=pa.int64())).to_pylist()
    assert expected == Columns(TABLE).rows(names, positions)


def test_a_sliced_table_reads_its_own_rows():
    sliced = TABLE.slice(1, 3).combine_chunks()
    expected = sliced.take([0, 2]).to_pylist()
    assert expected == Columns(sliced).rows(sliced.column_names, [0, 2])


def test_values_of_one_column():
    assert ["last", None] == Columns(TABLE).values("text", [4, 2])
