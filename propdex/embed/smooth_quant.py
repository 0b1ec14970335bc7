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
embeddings"). The graph grows by one Mul per smoothed input (24); conversion by ~2 s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ALPHA = 0.7  # 0.5 and 0.85 measured worse: mean cosine to fp32 0.9879 and 0.9927
CALIBRATION_BATCH = 8  # texts per run: the 24 tensors read back for 8 texts take ~130 MB
CALIBRATION_TOKENS = 256
SMOOTHED_OPS = ("MatMul", "Attention")


def smooth_graph(source: Path, target: Path) -> None:
    """Write ``source`` with every weight product's input smoothed (same outputs in fp32)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    weights = {tensor.name: tensor for tensor in graph.initializer}
    products = [node for node in graph.node if node.op_type in SMOOTHED_OPS
                and len(node.input) > 1 and node.input[1] in weights]
    inputs = sorted({node.input[0] for node in products})
    activation_max = calibration_channel_max(source, inputs)
    muls = {}
    for name in inputs:
        users = [node for node in products if node.input[0] == name]
        matrices = [numpy_helper.to_array(weights[node.input[1]]) for node in users]
        weight_max = np.max([np.abs(matrix).max(axis=1) for matrix in matrices], axis=0)
        scales = smoothing_scales(activation_max[name], weight_max)
        smoothed = f"{name}_smoothed"
        for node, matrix in zip(users, matrices):
            scaled = (matrix * scales[:, None]).astype(np.float32)
            weights[node.input[1]].CopyFrom(numpy_helper.from_array(scaled, node.input[1]))
            node.input[0] = smoothed
        graph.initializer.append(numpy_helper.from_array(1.0 / scales, f"{name}_smoothing"))
        muls[smoothed] = helper.make_node("Mul", [name, f"{name}_smoothing"], [smoothed],
                                          name=f"{name}_Smooth")
    nodes: list = []
    for node in graph.node:  # each Mul right before the first node that reads it: still sorted
        nodes += [muls.pop(i) for i in node.input if i in muls]
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(target))


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
        for name, values in zip(tensors, outputs):
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
