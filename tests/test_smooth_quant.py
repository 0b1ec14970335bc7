"""SmoothQuant before int8: the smoothed fp32 graph computes the same vectors, and every
weight product reads a smoothed input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from propdex.embed.minilm_tokens import minilm_tokenizer
from propdex.embed.onnx_export import ensure_onnx_model
from propdex.embed.smooth_quant import SMOOTHED_OPS, smooth_graph, smoothing_scales

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

TEXTS = [
    "How are propositions graded?",
    "NIKE, INC. CONSOLIDATED STATEMENTS OF INCOME (In millions) Revenues $ 51,217 $ 46,710",
    "Level 3: Expert AGI, performing at least at the 90th percentile of skilled adults.",
]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("smooth")
    fp32 = ensure_onnx_model(folder, "fp32")
    smoothed = folder / "smoothed.onnx"
    smooth_graph(fp32, smoothed)
    return fp32, smoothed


def _vectors(path: Path) -> np.ndarray:
    encodings = minilm_tokenizer().encode_batch(TEXTS)
    ids = np.zeros((len(TEXTS), max(len(e.ids) for e in encodings)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"input_ids": ids, "attention_mask": mask,
                              "token_type_ids": np.zeros_like(ids)})[0]


def test_the_smoothed_fp32_graph_gives_the_same_vectors(graphs):
    original, smoothed = (_vectors(path) for path in graphs)
    assert np.allclose(original, smoothed, atol=1e-4)


def test_every_weight_product_reads_a_smoothed_input(graphs):
    nodes = onnx.load(str(graphs[1])).graph.node
    smoothed = {node.output[0] for node in nodes if node.name.endswith("_Smooth")}
    products = [node for node in nodes if node.op_type in SMOOTHED_OPS]
    assert (24, True) == (len(smoothed), all(node.input[0] in smoothed for node in products))


def test_a_channel_with_larger_activations_is_divided_more():
    scales = smoothing_scales(np.array([1.0, 16.0]), np.array([1.0, 1.0]), alpha=0.5)
    assert [1.0, 4.0] == scales.tolist()
