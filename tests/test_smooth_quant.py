"""SmoothQuant before int8: the smoothed fp32 graph computes the same vectors, every weight
product reads a smoothed input, and the shipped calibration statistics are this package's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from propdex.embed import smooth_quant
from propdex.embed.minilm_graph import minilm_graph_and_weights, write_model
from propdex.embed.onnx_export import ensure_onnx_model, packaged_model_dir
from propdex.embed.smooth_quant import (
    SMOOTHED_OPS,
    activation_max,
    calibrate,
    smooth_products,
    smoothing_scales,
    write_shipped_statistics,
)
from tests.onnx_graphs import SAMPLE_TEXTS, graph_vectors

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

TEXTS = SAMPLE_TEXTS


@pytest.fixture(scope="module")
def graphs(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("smooth")
    fp32 = ensure_onnx_model(folder, "fp32")
    smoothed = folder / "smoothed.onnx"
    model, weights = minilm_graph_and_weights(packaged_model_dir())
    smooth_products(model, weights, activation_max(packaged_model_dir()))
    write_model(model, weights, smoothed)
    return fp32, smoothed


@pytest.fixture(scope="module")
def calibrated() -> dict[str, np.ndarray]:
    return calibrate(packaged_model_dir())


def test_the_smoothed_fp32_graph_gives_the_same_vectors(graphs):
    original, smoothed = (graph_vectors(path, TEXTS) for path in graphs)
    assert np.allclose(original, smoothed, atol=1e-4)


def test_every_weight_product_reads_a_smoothed_input(graphs):
    nodes = onnx.load(str(graphs[1])).graph.node
    smoothed = {node.output[0] for node in nodes if node.name.endswith("_Smooth")}
    products = [node for node in nodes if node.op_type in SMOOTHED_OPS]
    assert (24, True) == (len(smoothed), all(node.input[0] in smoothed for node in products))


def test_a_channel_with_larger_activations_is_divided_more():
    scales = smoothing_scales(np.array([1.0, 16.0]), np.array([1.0, 1.0]), alpha=0.5)
    assert [1.0, 4.0] == scales.tolist()


def test_the_shipped_statistics_are_a_fresh_calibration(calibrated):
    # Fails after an edit of the calibration texts (propdex's prompts) or of the packaged
    # weights: rebuild with `python -m propdex.embed.smooth_quant build` and bump INT8_RECIPE.
    shipped = activation_max(packaged_model_dir())
    assert sorted(calibrated) == sorted(shipped)
    # Close, not equal: ONNX Runtime's kernels differ a little between CPUs.
    assert all(np.allclose(calibrated[name], shipped[name], rtol=1e-3) for name in calibrated)


def test_statistics_of_other_weights_are_not_used(tmp_path, monkeypatch, calibrated):
    other = tmp_path / "other.npz"
    np.savez_compressed(other, __key__=np.array("statistics of other weights"),
                        **{name: values * 2 for name, values in calibrated.items()})
    monkeypatch.setattr(smooth_quant, "STATISTICS_FILE", other)
    found = activation_max(packaged_model_dir())
    assert all(np.array_equal(calibrated[name], found[name]) for name in calibrated)


def test_the_build_command_writes_statistics_that_are_then_used(tmp_path, monkeypatch):
    written = write_shipped_statistics(packaged_model_dir(), tmp_path / "stats.npz")
    monkeypatch.setattr(smooth_quant, "calibrate", None)  # a calibration now would fail
    monkeypatch.setattr(smooth_quant, "STATISTICS_FILE", written)
    assert 24 == len(activation_max(packaged_model_dir()))
