"""Running a MiniLM ONNX file on a few texts, for the graph tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from propdex.embed.minilm_tokens import minilm_tokenizer

# A question, a table line with numbers and a definition: short texts of different kinds.
SAMPLE_TEXTS = [
    "How are propositions graded?",
    "NIKE, INC. CONSOLIDATED STATEMENTS OF INCOME (In millions) Revenues $ 51,217 $ 46,710",
    "Level 3: Expert AGI, performing at least at the 90th percentile of skilled adults.",
]


def padded_batch(texts: list[str]) -> dict[str, np.ndarray]:
    """One batch, padded on the right to its longest text."""
    rows = [e.ids for e in minilm_tokenizer().encode_batch(texts, add_special_tokens=True)]
    ids = np.zeros((len(rows), max(map(len, rows))), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def graph_vectors(path: Path, texts: list[str]) -> np.ndarray:
    """The model's (unnormalised) sentence embeddings of ``texts``."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, padded_batch(texts))[0]
