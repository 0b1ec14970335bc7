"""Tensors of a .safetensors file as numpy arrays, read with numpy alone.

The format is an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw little-endian bytes. Parsing it here keeps the ONNX builder
free of the ``safetensors`` package, which only torch-side packages bring in.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from propdex.errors import EmbedModelError

_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of ``path``, read-only views of one memory map (nothing is copied)."""
    with path.open("rb") as file:
        header_size = int.from_bytes(file.read(8), "little")
        try:
            header = json.loads(file.read(header_size))
        except ValueError as exc:
            raise EmbedModelError(f"{path} is not a safetensors file: {exc}") from exc
    header.pop("__metadata__", None)
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_size)
    tensors = {}
    for name, entry in header.items():
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise EmbedModelError(f"{path}: tensor {name} has dtype {entry['dtype']}, "
                                  "which numpy cannot hold")
        start, end = entry["data_offsets"]
        tensors[name] = data[start:end].view(dtype).reshape(entry["shape"])
    return tensors
