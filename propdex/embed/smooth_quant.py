"""SmoothQuant for the int8 MiniLM: move the activations' outlier channels into the weights.

Dynamic int8 quantization gives each matrix product's input one scale for the whole tensor,
and a few of BERT's hidden channels are far larger than the rest: every other channel is then
rounded to a handful of levels. Dividing input channel j by s_j and multiplying row j of the
weights by s_j leaves the product unchanged in exact arithmetic and evens the channels out, at
the price of one elementwise Mul per product (Xiao et al. 2023, SmoothQuant). The s_j come
from the largest |x_j| the fp32 model produces on packaged texts (the model card and propdex's
prompts) and the largest |w_j|:  s_j = max|x_j|^alpha / max|w_j|^(1 - alpha).

On the 380 texts of levels_of_agi.pdf this took int8's cosine to the fp32 vectors from
0.9795 min / 0.9934 mean to 0.9867 / 0.9955, at the same speed (bench/RESULTS.md, "Local
embeddings"). The graph grows by one Mul per smoothed input (24). The activations' maxima are
shipped (STATISTICS_FILE), so converting runs no calibration unless the weights differ.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

ALPHA = 0.7  # 0.5 and 0.85 measured worse: mean cosine to fp32 0.9879 and 0.9927
CALIBRATION_BATCH = 8  # texts per run: the 24 tensors read back for 8 texts take ~130 MB
CALIBRATION_TOKENS = 256
SMOOTHED_OPS = ("MatMul", "Attention")
# Computed once from the packaged weights and calibration texts (write_shipped_statistics):
# converting then costs no calibration run. 24 tensors of 384 or 1,536 channels.
STATISTICS_FILE = Path(__file__).with_name("minilm_activation_max.npz")
_KEY = "__key__"


def smooth_products(model, weights: dict[str, np.ndarray],
                    activation_max: dict[str, np.ndarray]) -> None:
    """Smooth every weight product's input of ``model`` (as minilm_graph_and_weights returns
    it), in place: the products' weights in ``weights`` are scaled and one Mul per input is
    added before its first reader. The outputs stay the same in fp32."""
    from onnx import helper

    graph = model.graph
    products = _products(model, weights)
    muls = {}
    for name in product_inputs(model, weights):
        users = [node for node in products if node.input[0] == name]
        weight_max = np.max([np.abs(weights[node.input[1]]).max(axis=1) for node in users],
                            axis=0)
        scales = smoothing_scales(activation_max[name], weight_max)
        smoothed = f"{name}_smoothed"
        for node in users:
            weights[node.input[1]] = (weights[node.input[1]] * scales[:, None]).astype(np.float32)
            node.input[0] = smoothed
        weights[f"{name}_smoothing"] = (1.0 / scales).astype(np.float32)
        muls[smoothed] = helper.make_node("Mul", [name, f"{name}_smoothing"], [smoothed],
                                          name=f"{name}_Smooth")
    nodes: list = []
    for node in graph.node:  # each Mul right before the first node that reads it: still sorted
        nodes += [muls.pop(i) for i in node.input if i in muls]
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


def product_inputs(model, weights: dict[str, np.ndarray]) -> list[str]:
    """The tensors smoothing divides: the inputs of the products with a weight."""
    return sorted({node.input[0] for node in _products(model, weights)})


def _products(model, weights: dict[str, np.ndarray]) -> list:
    return [node for node in model.graph.node if node.op_type in SMOOTHED_OPS
            and len(node.input) > 1 and node.input[1] in weights]


def activation_max(model_dir: Path) -> dict[str, np.ndarray]:
    """Largest |value| per channel of each product input over the calibration texts: the
    shipped statistics when they were computed from these weights and texts, else computed
    now (~2 s of CPU: the fp32 model runs over the texts)."""
    key = calibration_key(model_dir)
    shipped = _shipped_statistics()
    if shipped is not None and shipped[0] == key:
        return shipped[1]
    return calibrate(model_dir)


def calibrate(model_dir: Path) -> dict[str, np.ndarray]:
    """Run the fp32 graph over the calibration texts and read each product input's maximum."""
    import tempfile

    from propdex.embed.minilm_graph import minilm_graph_and_weights, write_model

    model, weights = minilm_graph_and_weights(model_dir)
    inputs = product_inputs(model, weights)
    with tempfile.TemporaryDirectory(prefix="propdex-calibrate-") as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        write_model(model, weights, fp32)
        del weights
        return calibration_channel_max(fp32, inputs)


def calibration_key(model_dir: Path) -> str:
    """What the statistics depend on: the weights' bytes, the texts and how they are read."""
    digest = hashlib.sha256()
    with (model_dir / "model.safetensors").open("rb") as weights:
        while block := weights.read(1 << 22):
            digest.update(block)
    digest.update("\0".join(calibration_texts()).encode())
    digest.update(f"{CALIBRATION_BATCH}:{CALIBRATION_TOKENS}".encode())
    return digest.hexdigest()


def _shipped_statistics() -> tuple[str, dict[str, np.ndarray]] | None:
    if not STATISTICS_FILE.is_file():
        return None
    with np.load(STATISTICS_FILE, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    return str(arrays.pop(_KEY)), arrays


def write_shipped_statistics(model_dir: Path, path: Path | None = None) -> Path:
    """Calibrate and store the statistics with their key (``python -m
    propdex.embed.smooth_quant build``; rebuild after changing the calibration texts or the
    packaged weights, and bump INT8_RECIPE in onnx_export.py: the int8 vectors change)."""
    path = path or STATISTICS_FILE
    arrays = calibrate(model_dir)
    np.savez_compressed(path, **{_KEY: np.array(calibration_key(model_dir))}, **arrays)
    return path


def smoothing_scales(activation_max: np.ndarray, weight_max: np.ndarray,
                     alpha: float = ALPHA) -> np.ndarray:
    """Per input channel divisors of the activations (and multipliers of the weight rows)."""
    activation = np.clip(activation_max, 1e-5, None)
    weight = np.clip(weight_max, 1e-5, None)
    return (activation**alpha / weight ** (1 - alpha)).astype(np.float32)


def calibration_channel_max(model_path: Path, tensors: list[str]) -> dict[str, np.ndarray]:
    """Largest |value| per channel of each named tensor over the calibration texts' tokens."""
    import onnxruntime as ort

    from propdex.embed.minilm_tokens import minilm_tokenizer

    session = ort.InferenceSession(_with_outputs(model_path, tensors),
                                   providers=["CPUExecutionProvider"])
    texts = calibration_texts()
    tokenizer = minilm_tokenizer()
    found: dict[str, np.ndarray] = {}
    for start in range(0, len(texts), CALIBRATION_BATCH):
        encodings = tokenizer.encode_batch(texts[start : start + CALIBRATION_BATCH])
        length = min(CALIBRATION_TOKENS, max(len(e.ids) for e in encodings))
        ids = np.zeros((len(encodings), length), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            kept = encoding.ids[:length]
            ids[row, : len(kept)] = kept
            mask[row, : len(kept)] = 1
        outputs = session.run(tensors, {"input_ids": ids, "attention_mask": mask,
                                        "token_type_ids": np.zeros_like(ids)})
        real = mask.reshape(-1) == 1  # padding positions are no input the model really sees
        for name, values in zip(tensors, outputs, strict=True):
            largest = np.abs(values.reshape(-1, values.shape[-1])[real]).max(axis=0)
            found[name] = np.maximum(found[name], largest) if name in found else largest
    return found


def _with_outputs(model_path: Path, tensors: list[str]) -> bytes:
    """The model with ``tensors`` as extra outputs, serialised (its parsed copy is freed)."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(model_path))
    model.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
                              for name in tensors)
    return model.SerializeToString()


def calibration_texts() -> list[str]:
    """Paragraphs of text that ships with propdex and the model: no corpus is needed to convert."""
    from propdex.embed.onnx_export import packaged_model_dir

    files = [packaged_model_dir() / "README.md",
             *sorted((Path(__file__).parents[1] / "llm" / "prompts").glob("*.md"))]
    return [paragraph.strip() for path in files
            for paragraph in path.read_text(encoding="utf-8").split("\n\n")
            if len(paragraph.strip()) > 20]


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        raise SystemExit("usage: python -m propdex.embed.smooth_quant build")
    from propdex.embed.onnx_export import packaged_model_dir

    print(write_shipped_statistics(packaged_model_dir()))
