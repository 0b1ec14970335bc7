"""The int8 MiniLM, written with numpy: SmoothQuant, then dynamic int8 products.

What ``onnxruntime.quantization.quantize_dynamic(weight_type=QInt8, per_channel=True,
op_types_to_quantize=["MatMul", "Attention"], reduce_range=True)`` made of the smoothed fp32
graph, node for node and weight for weight (tests/test_int8_graph.py compares the two), built
in the process that embeds: no quantization tool, no second copy of the model, no calibration
run when the shipped statistics match (propdex/embed/smooth_quant.py).

Each weight product ``Y = X @ W`` becomes: X quantized at run time to uint8 with its own
scale and zero point (DynamicQuantizeLinear), W stored as int8 with one scale per output
column (symmetric, zero point 0, 7 bits: see WEIGHT_MAX), their integer product
(MatMulInteger; QAttention for the fused attention), and
Y = float(product) * (scale of X * scales of W).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from propdex.embed.minilm_graph import MS, minilm_graph_and_weights, write_model
from propdex.embed.smooth_quant import activation_max, smooth_products

QUANTIZED_OPS = ("MatMul", "Attention")
# Weights use [-64, 64], onnxruntime's reduce_range for symmetric int8, not [-127, 127]. On
# x86 CPUs without VNNI (AVX2 only: many AMD EPYC and older Intel parts) MatMulInteger's
# uint8 x int8 kernel (VPMADDUBSW) adds pairs of products in int16 and saturates: 2 x 255 x
# 127 overflows 32767, 2 x 255 x 64 does not. With the full range the document vectors fell
# to cosine 0.937 min / 0.971 mean of fp32's on such a CPU, with 7 bits 0.984 / 0.994; on a
# VNNI CPU, where nothing saturates, 7 bits measured the same as 8 (bench/RESULTS.md).
WEIGHT_MAX = 64


def write_int8_minilm_graph(model_dir: Path, path: Path) -> None:
    """Build, smooth and quantize the MiniLM graph of ``model_dir`` into ``path``."""
    model, weights = minilm_graph_and_weights(model_dir)
    smooth_products(model, weights, activation_max(model_dir))
    quantize_products(model, weights)
    write_model(model, weights, path)


def quantize_per_column(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``matrix`` (in, out) as int8 with one float32 scale per column, computed the way
    onnxruntime.quantization does: the range is made to include 0 and symmetric, the scale is
    2 * absmax / (2 * WEIGHT_MAX) in float64 stored as float32, values are divided by the
    stored scale in float32 and rounded half to even."""
    matrix = matrix.astype(np.float32, copy=False)
    low = np.minimum(matrix.min(axis=0), np.float32(0))
    high = np.maximum(matrix.max(axis=0), np.float32(0))
    absmax = np.maximum(np.abs(low), np.abs(high)).astype(np.float64)
    scale = (2 * absmax / (2 * WEIGHT_MAX)).astype(np.float32)
    # onnxruntime's rule for an all-zero column: scale 1, so nothing divides by zero.
    scale = np.where(scale < np.finfo(np.float32).tiny, np.float32(1), scale)
    quantized = np.clip(np.round(matrix / scale[None, :]), -WEIGHT_MAX, WEIGHT_MAX)
    return quantized.astype(np.int8), scale


def quantize_products(model, weights: dict[str, np.ndarray]) -> None:
    """Replace each MatMul and Attention reading a weight by its dynamic int8 form, in place
    (``weights``: initializers by name; the fp32 weights leave it)."""
    from onnx import TensorProto, helper

    quantized_inputs: set[str] = set()
    nodes: list = []
    for node in model.graph.node:
        if node.op_type not in QUANTIZED_OPS or len(node.input) < 2 or node.input[1] not in weights:
            nodes.append(node)
            continue
        source, weight = node.input[0], node.input[1]
        q_x, s_x, z_x = (f"{source}_quantized", f"{source}_scale", f"{source}_zero_point")
        if source not in quantized_inputs:
            quantized_inputs.add(source)
            nodes.append(helper.make_node("DynamicQuantizeLinear", [source], [q_x, s_x, z_x],
                                          name=f"{source}_QuantizeLinear"))
        values, scale = quantize_per_column(weights.pop(weight))
        weights[f"{weight}_quantized"] = values
        weights[f"{weight}_scale"] = scale
        weights[f"{weight}_zero_point"] = np.zeros(scale.shape, np.int8)
        q_w, s_w, z_w = f"{weight}_quantized", f"{weight}_scale", f"{weight}_zero_point"
        if node.op_type == "Attention":
            attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            bias, mask = node.input[2], node.input[3] if len(node.input) > 3 else ""
            nodes.append(helper.make_node(
                "QAttention", [q_x, q_w, bias, s_x, s_w, mask, z_x, z_w, ""], list(node.output),
                name=f"{node.name}_quant", domain=MS, **attributes))
            continue
        output = node.output[0]
        nodes += [
            helper.make_node("Mul", [s_x, s_w], [f"{output}_scales"], name=f"{node.name}_scales"),
            helper.make_node("MatMulInteger", [q_x, q_w, z_x, z_w], [f"{output}_int32"],
                             name=f"{node.name}_quant"),
            helper.make_node("Cast", [f"{output}_int32"], [f"{output}_float"],
                             to=TensorProto.FLOAT, name=f"{node.name}_cast"),
            helper.make_node("Mul", [f"{output}_float", f"{output}_scales"], [output],
                             name=f"{node.name}_rescale"),
        ]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
