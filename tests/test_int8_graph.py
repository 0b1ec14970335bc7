"""The int8 MiniLM written with numpy is the model onnxruntime's quantizer makes of the
smoothed graph: the same weights, bit for bit, and the same vectors."""

from __future__ import annotations

import numpy as np
import pytest

from propdex.embed.int8_graph import quantize_per_column, write_int8_minilm_graph
from propdex.embed.minilm_graph import minilm_graph_and_weights, write_model
from propdex.embed.onnx_export import packaged_model_dir
from propdex.embed.smooth_quant import activation_max, smooth_products
from tests.onnx_graphs import SAMPLE_TEXTS, graph_vectors

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

TEXTS = SAMPLE_TEXTS


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(ours, onnxruntime.quantization's) int8 models of the same smoothed graph."""
    quantization = pytest.importorskip(
        "onnxruntime.quantization", reason="the reference needs onnxruntime.quantization")
    folder = tmp_path_factory.mktemp("int8")
    ours = folder / "ours.onnx"
    write_int8_minilm_graph(packaged_model_dir(), ours)
    model, weights = minilm_graph_and_weights(packaged_model_dir())
    smooth_products(model, weights, activation_max(packaged_model_dir()))
    smoothed, reference = folder / "smoothed.onnx", folder / "reference.onnx"
    write_model(model, weights, smoothed)
    quantization.quantize_dynamic(
        str(smoothed), str(reference), weight_type=quantization.QuantType.QInt8,
        per_channel=True, op_types_to_quantize=["MatMul", "Attention"], reduce_range=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return ours, reference


def _initializers(path) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def test_the_weights_are_the_quantizers_bit_for_bit(models):
    ours, reference = (_initializers(path) for path in models)
    assert sorted(reference) == sorted(ours)
    assert [] == [name for name in ours if ours[name].dtype != reference[name].dtype
                  or not np.array_equal(ours[name], reference[name])]


def test_the_vectors_are_the_quantizers(models):
    ours, reference = (graph_vectors(path, TEXTS) for path in models)
    assert np.array_equal(reference, ours)


def test_the_products_run_on_integer_kernels(models):
    ops = [node.op_type for node in onnx.load(str(models[0])).graph.node]
    assert (18, 6, 24, 0) == (ops.count("MatMulInteger"), ops.count("QAttention"),
                              ops.count("DynamicQuantizeLinear"), ops.count("MatMul"))


@pytest.mark.parametrize("column, expected_scale", [
    ([0.32, -0.64], 0.01),  # the larger magnitude sets the range, symmetric around 0
    ([1.28, 1.0], 0.02),    # a column of one sign still includes 0
    ([0.0, 0.0], 1.0),      # an all-zero column keeps scale 1 (nothing divides by 0)
])
def test_each_column_gets_its_own_symmetric_scale(column, expected_scale):
    values, scales = quantize_per_column(np.array([column], dtype=np.float32).T)
    assert pytest.approx(expected_scale) == float(scales[0])
    assert np.abs(values).max() <= 64


def test_no_pair_of_products_overflows_int16(models):
    # x86 CPUs without VNNI add two uint8 x int8 products in int16 (VPMADDUBSW) and saturate:
    # the weights must keep 2 x 255 x |w| within int16 on every CPU, not only on VNNI ones.
    weights = [values for name, values in _initializers(models[0]).items()
               if name.endswith("_quantized")]
    largest = max(int(np.abs(values.astype(np.int32)).max()) for values in weights)
    assert 18 + 6 == len(weights)
    assert 2 * 255 * largest <= np.iinfo(np.int16).max
