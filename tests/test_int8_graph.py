"""The int8 MiniLM that onnxruntime's quantizer makes of the fp32 graph: every weight product
on the integer kernels, with weights small enough for CPUs without VNNI."""

from __future__ import annotations

import numpy as np
import pytest

from propdex.embed.onnx_export import ensure_onnx_model

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime.quantization")


@pytest.fixture(scope="module")
def int8_model(tmp_path_factory):
    return onnx.load(str(ensure_onnx_model(tmp_path_factory.mktemp("int8"), "int8")))


def test_the_products_run_on_integer_kernels(int8_model):
    ops = [node.op_type for node in int8_model.graph.node]
    assert (18, 6, 24, 0) == (ops.count("MatMulInteger"), ops.count("QAttention"),
                              ops.count("DynamicQuantizeLinear"), ops.count("MatMul"))


def test_no_pair_of_products_overflows_int16(int8_model):
    # x86 CPUs without VNNI add two uint8 x int8 products in int16 (VPMADDUBSW) and saturate:
    # the weights must keep 2 x 255 x |w| within int16 on every CPU, not only on VNNI ones.
    from onnx import numpy_helper

    weights = [numpy_helper.to_array(t) for t in int8_model.graph.initializer
               if t.name.endswith("_quantized")]
    largest = max(int(np.abs(values.astype(np.int32)).max()) for values in weights)
    assert 18 + 6 == len(weights)
    assert 2 * 255 * largest <= np.iinfo(np.int16).max
