"""all-MiniLM-L6-v2 (BERT + sentence-transformers' mean pooling) as an ONNX graph, written
directly from the packaged weights with ``onnx.helper``: no torch, no exporter, no optimizer.

The graph is the one onnxruntime's transformer optimizer made of torch's export (EXPORT_RECIPE
3), built node for node: ONNX Runtime's fused contrib ops (domain ``com.microsoft``) for the
embeddings + layer norm, self-attention with packed Q/K/V weights, the residual + layer norm
and bias + exact GELU, plain MatMul for the dense layers, and mean pooling over the attention
mask in plain ops. Same inputs and output as before: ``input_ids``, ``attention_mask``,
``token_type_ids`` (int64, batch x tokens) -> ``sentence_embedding`` (float, batch x 384,
not normalised). Padding must be on the right: the attention reads each row's mask as its
length (EmbedLayerNormalization's mask index), as it did in the optimized graph.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from propdex.embed.safetensors_numpy import read_safetensors
from propdex.errors import EmbedModelError

OPSET = 17
# IR version 8 (ONNX 1.10+) loads in every onnxruntime the 'local' extra allows (>= 1.20).
IR_VERSION = 8
MS = "com.microsoft"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "sentence_embedding"


def minilm_graph(model_dir: Path):
    """The ``onnx.ModelProto`` of the BERT checkpoint in ``model_dir`` (config.json +
    model.safetensors) with mean pooling."""
    from onnx import numpy_helper

    model, weights = minilm_graph_and_weights(model_dir)
    model.graph.initializer.extend(numpy_helper.from_array(array, name)
                                   for name, array in weights.items())
    return model


def write_minilm_graph(model_dir: Path, path: Path) -> None:
    """Write ``minilm_graph(model_dir)`` to ``path`` (see ``write_model``)."""
    write_model(*minilm_graph_and_weights(model_dir), path)


def write_model(model, weights: dict[str, np.ndarray], path: Path) -> None:
    """Write ``model`` with ``weights`` as its initializers, each weight's bytes straight from
    its array.

    Serialising the whole model holds every weight four times over (the arrays, their bytes,
    the TensorProtos, the serialised model: ~400 MiB of RSS for 90 MB of weights). Protobuf
    parsers merge repeated occurrences of a message field, so the file is the model without
    weights followed by one ``graph { initializer { ... } }`` record per weight, written field
    by field: the same model when read, and no weight is copied.
    """
    from onnx import TensorProto, helper

    with path.open("wb") as file:
        file.write(model.SerializeToString())
        for name, array in weights.items():
            array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
            described = TensorProto(name=name, dims=array.shape,
                                    data_type=helper.np_dtype_to_tensor_dtype(array.dtype))
            head = described.SerializeToString() + _field_header(_TENSOR_RAW_DATA, array.nbytes)
            initializer = _field_header(_GRAPH_INITIALIZER, len(head) + array.nbytes)
            file.write(_field_header(_MODEL_GRAPH, len(initializer) + len(head) + array.nbytes))
            file.write(initializer + head)
            file.write(memoryview(array).cast("B"))


# Field numbers in onnx.proto.
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_RAW_DATA = 9


def _field_header(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited protobuf field (wire type 2) of ``length`` bytes."""
    return _varint(number << 3 | 2) + _varint(length)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def minilm_graph_and_weights(model_dir: Path):
    """The model without initializers and its weights by initializer name, in graph order:
    the form ``write_model`` takes (propdex/embed/int8_graph.py rewrites both first)."""
    from onnx import TensorProto, helper

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type",
                                                         "absolute") != "absolute":
        raise EmbedModelError(f"{model_dir}: only BERT with exact GELU and absolute positions "
                              "can be built as ONNX here")
    weights = _Initializers(read_safetensors(model_dir / "model.safetensors"))
    eps = float(config["layer_norm_eps"])
    nodes = [
        # Mean pooling's weights and counts: the mask as float, (batch, tokens, 1), (batch, 1).
        helper.make_node("Unsqueeze",
                         ["attention_mask", weights.add("axis_last", np.array([-1], np.int64))],
                         ["mask_3d"]),
        helper.make_node("Cast", ["mask_3d"], ["mask_float_3d"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum",
                         ["mask_float_3d", weights.add("axis_tokens", np.array([1], np.int64))],
                         ["mask_count"], keepdims=0),
        helper.make_node("Clip", ["mask_count", weights.add("count_min", np.float32(1e-9))],
                         ["mask_count_clipped"]),
        *(helper.make_node("Cast", [name], [name + "_int32"], to=TensorProto.INT32)
          for name in INPUTS),
        # Word + position + token type embeddings, layer norm; and each row's length from its
        # mask (the "mask index" the attention nodes read).
        helper.make_node(
            "EmbedLayerNormalization",
            ["input_ids_int32", "token_type_ids_int32",
             weights.stored("embeddings.word_embeddings.weight"),
             weights.stored("embeddings.position_embeddings.weight"),
             weights.stored("embeddings.token_type_embeddings.weight"),
             weights.stored("embeddings.LayerNorm.weight"),
             weights.stored("embeddings.LayerNorm.bias"), "attention_mask_int32"],
            ["hidden.embeddings", "mask_index"], domain=MS, epsilon=eps,
        ),
    ]
    hidden = "hidden.embeddings"
    for layer in range(int(config["num_hidden_layers"])):
        layer_nodes, hidden = _encoder_layer(weights, f"encoder.layer.{layer}.", hidden,
                                             int(config["num_attention_heads"]), eps)
        nodes += layer_nodes
    nodes += [
        helper.make_node("Mul", [hidden, "mask_float_3d"], ["hidden.masked"]),
        helper.make_node("ReduceSum", ["hidden.masked", "axis_tokens"], ["hidden.sum"],
                         keepdims=0),
        helper.make_node("Div", ["hidden.sum", "mask_count_clipped"], [OUTPUT]),
    ]
    for n, node in enumerate(nodes):
        node.name = f"{node.op_type}_{n}"
    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
         for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT,
                                       ["batch", int(config["hidden_size"])])],
    )
    model = helper.make_model(graph, ir_version=IR_VERSION, producer_name="propdex",
                              opset_imports=[helper.make_opsetid("", OPSET),
                                             helper.make_opsetid(MS, 1)])
    return model, weights.arrays


def _encoder_layer(weights: _Initializers, at: str, hidden: str, heads: int, eps: float):
    """The nodes of one BERT layer whose weights are named ``at``*, reading ``hidden``, and
    the name of its output."""
    from onnx import helper

    qkv = [at + f"attention.self.{part}" for part in ("query", "key", "value")]
    nodes = [
        helper.make_node(
            "Attention",
            [hidden, weights.add(at + "attention.qkv.weight",
                                 np.concatenate([weights.linear_weight(p) for p in qkv], axis=1)),
             weights.add(at + "attention.qkv.bias",
                         np.concatenate([weights.tensors[p + ".bias"] for p in qkv])),
             "mask_index"],
            [at + "attention"], domain=MS, num_heads=heads,
        ),
        helper.make_node("MatMul",
                         [at + "attention", weights.linear(at + "attention.output.dense")],
                         [at + "attention.dense"]),
        # Residual + dense bias + layer norm.
        helper.make_node("SkipLayerNormalization",
                         [at + "attention.dense", hidden,
                          weights.stored(at + "attention.output.LayerNorm.weight"),
                          weights.stored(at + "attention.output.LayerNorm.bias"),
                          weights.stored(at + "attention.output.dense.bias")],
                         [at + "attention.normed"], domain=MS, epsilon=eps),
        helper.make_node("MatMul", [at + "attention.normed",
                                    weights.linear(at + "intermediate.dense")],
                         [at + "intermediate.dense"]),
        # Bias + exact (erf) GELU, BERT's "gelu".
        helper.make_node("BiasGelu", [at + "intermediate.dense",
                                      weights.stored(at + "intermediate.dense.bias")],
                         [at + "intermediate.gelu"], domain=MS),
        helper.make_node("MatMul", [at + "intermediate.gelu", weights.linear(at + "output.dense")],
                         [at + "output.dense"]),
        helper.make_node("SkipLayerNormalization",
                         [at + "output.dense", at + "attention.normed",
                          weights.stored(at + "output.LayerNorm.weight"),
                          weights.stored(at + "output.LayerNorm.bias"),
                          weights.stored(at + "output.dense.bias")],
                         [at + "output"], domain=MS, epsilon=eps),
    ]
    return nodes, at + "output"


class _Initializers:
    """The graph's weights by initializer name, taken from the checkpoint's tensors (named
    with or without the ``bert.`` prefix of a BertModel saved from a task model)."""

    def __init__(self, tensors: dict[str, np.ndarray]):
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""
        self.tensors = {name.removeprefix(prefix): array for name, array in tensors.items()}
        self.arrays: dict[str, np.ndarray] = {}

    def add(self, name: str, value: np.ndarray) -> str:
        self.arrays[name] = np.ascontiguousarray(value)
        return name

    def stored(self, name: str) -> str:
        """The checkpoint's tensor ``name``, unchanged."""
        return self.add(name, self.tensors[name])

    def linear_weight(self, layer: str) -> np.ndarray:
        """A dense layer's weight for ``MatMul``: torch keeps (out, in), ONNX wants (in, out)."""
        return self.tensors[layer + ".weight"].T

    def linear(self, layer: str) -> str:
        return self.add(layer + ".weight", self.linear_weight(layer))
