"""all-MiniLM-L6-v2 (BERT + sentence-transformers' mean pooling) as an ONNX graph, built
from the packaged weights with ``onnx.helper``: no torch, no exporter, no optimizer.

The graph has the shape onnxruntime's transformer optimizer gives BERT: ONNX Runtime's fused
contrib ops (domain ``com.microsoft``) for the embeddings + layer norm, self-attention with
packed Q/K/V weights, the residual + layer norm and bias + exact GELU, plain MatMul for the
dense layers, and mean pooling over the attention mask in plain ops. Inputs ``input_ids``,
``attention_mask``, ``token_type_ids`` (int64, batch x tokens), output ``sentence_embedding``
(float, batch x 384, not normalised). Padding must be on the right: the attention reads each
row's mask as its length (EmbedLayerNormalization's mask index).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from propdex.embed.minilm_weights import minilm_checkpoint, packaged_model_dir
from propdex.errors import EmbedModelError

OPSET = 17
# IR version 8 (ONNX 1.10+) loads in every onnxruntime the 'local' extra allows (>= 1.20).
IR_VERSION = 8
MS = "com.microsoft"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "sentence_embedding"


def minilm_graph():
    """The ``onnx.ModelProto`` of the packaged BERT checkpoint with mean pooling."""
    from onnx import numpy_helper

    model, weights = minilm_graph_and_weights()
    model.graph.initializer.extend(numpy_helper.from_array(array, name)
                                   for name, array in weights.items())
    return model


def write_minilm_graph(path: Path) -> None:
    """Write ``minilm_graph()`` to ``path``."""
    import onnx

    onnx.save_model(minilm_graph(), str(path))


def minilm_graph_and_weights():
    """The model without initializers and its weights by initializer name, in graph order."""
    from onnx import TensorProto, helper

    config_file = packaged_model_dir() / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type",
                                                         "absolute") != "absolute":
        raise EmbedModelError(f"{config_file}: only BERT with exact GELU and absolute positions "
                              "can be built as ONNX here")
    weights = _Initializers(minilm_checkpoint())
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
    """The graph's weights by initializer name, taken from the checkpoint's tensors."""

    def __init__(self, tensors: dict[str, np.ndarray]):
        self.tensors = tensors
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
