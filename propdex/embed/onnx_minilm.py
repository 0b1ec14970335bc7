"""Local all-MiniLM-L6-v2 on ONNX Runtime: no torch at ingest or query time.

Vectors are sentence-transformers' (mean pooling over word pieces, L2-normalised) for every
text that fits MiniLM's window of 256 word pieces, within what the packaged int8-stored
weights allow (cosine 0.999). A longer text is not cut: it is read in overlapping windows of
the same size and its vector is the normalised mean of the windows' vectors, so every word
piece reaches the vector (issue 15: no silent truncation).

Documents are embedded with the int8 model by default (PROPDEX_EMBED_PRECISION: faster than
fp32, the same default-search scores on the dev set); a query is always embedded in fp32, so
its vector stays sentence-transformers' (issue 13) and one short text costs a few ms either
way.

A text's vector depends on that text alone. int8 runs one text (one window) at a time: the
quantized activations are scaled per run, so a batch would couple its texts' vectors; it costs
no more CPU than batching (bench/RESULTS.md). Such small runs leave a second intra-op thread
mostly waiting, so int8 runs go to one pool of threads per process, as many as the process
may use, each run on a single intra-op thread of one shared session (``InferenceSession.run``
is thread-safe and releases the GIL): documents embedding at once queue on the same pool
instead of oversubscribing the cores, and a run's result does not depend on the thread that
ran it. fp32 texts are tokenized up front, sorted by length and packed into batches by token
count (little padding); one session per process runs them with as many intra-op threads as
the process may use, under a lock, so documents embedding at once take turns.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from propdex.embed.base import Embedder, usable_cores
from propdex.embed.minilm_tokens import MAX_TOKENS, minilm_tokenizer, token_windows
from propdex.embed.minilm_weights import weights_tag
from propdex.embed.onnx_export import INT8_RECIPE, INT8_RUNS, Precision, ensure_onnx_model

WINDOW_OVERLAP = 32  # word pieces shared by neighbouring windows of a long text
# Padded word pieces per ONNX run: small enough that a layer's activations stay in the CPU
# caches (measured in bench/RESULTS.md).
BATCH_TOKENS = 1024
MAX_BATCH_ROWS = 256


@functools.lru_cache(maxsize=4)
def _session(path: str, threads: int):
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ImportError(
            "local ONNX embeddings need onnxruntime: pip install 'propdex[local]'"
        ) from exc
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or usable_cores()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    # Idle intra-op threads sleep instead of spinning: on a machine shared with other work
    # (Prefect's API, extraction workers, other runs) spinning burns cores they need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


# One lock per process for batched runs: ONNX Runtime's intra-op pool already uses every
# core, so two documents running the model at once would only fight over them.
_run_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _run_pool(threads: int) -> ThreadPoolExecutor:
    """The threads one-text runs spread over, one pool per process and thread count."""
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="propdex-embed")


class OnnxMiniLMEmbedder(Embedder):
    dim = 384

    def __init__(self, onnx_dir: Path, precision: Precision = "fp32", threads: int = 0):
        self.onnx_dir = onnx_dir
        self.precision = precision
        self.threads = threads
        self.name = "all-MiniLM-L6-v2" if precision == "fp32" else "all-MiniLM-L6-v2-int8"

    def __repr__(self) -> str:
        return f"OnnxMiniLMEmbedder(precision={self.precision!r}, onnx_dir={str(self.onnx_dir)!r})"

    @property
    def cache_name(self) -> str:
        # Long texts are read in windows here but truncated by sentence-transformers: their
        # cached vectors must not be shared with the torch runtime's. Vectors change with the
        # packaged weights, and int8 ones with the quantization recipe.
        name = f"{self.name}+windows+{weights_tag()}"
        return f"{name}+{INT8_RECIPE}+{INT8_RUNS}" if self.precision == "int8" else name

    def truncated(self, texts: list[str]) -> int | None:
        return 0  # every text is read whole, in windows when it is long

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self.precision)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text], "fp32")[0]

    def _embed(self, texts: list[str], precision: Precision) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        tokenizer = minilm_tokenizer()
        cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
        pieces: list[list[int]] = []
        owner: list[int] = []
        for text_index, encoding in enumerate(tokenizer.encode_batch(texts, add_special_tokens=False)):
            for window in token_windows(encoding.ids, MAX_TOKENS - 2, WINDOW_OVERLAP):
                pieces.append([cls_id, *window, sep_id])
                owner.append(text_index)
        piece_vectors = self._run(pieces, precision)
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        np.add.at(vectors, np.asarray(owner), piece_vectors)
        return _normalised(vectors)

    def _run(self, pieces: list[list[int]], precision: Precision) -> np.ndarray:
        """Normalised vectors of token-id sequences: fp32 batched by padded token count, int8
        one sequence per run (see the module's docstring)."""
        path = str(ensure_onnx_model(self.onnx_dir, precision))
        if precision == "int8":
            return _normalised(self._run_each(_session(path, 1), pieces))
        session = _session(path, self.threads)
        order = sorted(range(len(pieces)), key=lambda i: -len(pieces[i]))
        out = np.zeros((len(pieces), self.dim), dtype=np.float32)
        start = 0
        while start < len(order):
            longest = len(pieces[order[start]])  # sorted: the first of a batch is its longest
            rows = max(1, min(MAX_BATCH_ROWS, BATCH_TOKENS // longest))
            batch = order[start : start + rows]
            with _run_lock:
                out[batch] = session.run(None, _feeds([pieces[i] for i in batch], longest))[0]
            start += rows
        return _normalised(out)

    def _run_each(self, session, pieces: list[list[int]]) -> np.ndarray:
        """One run per sequence on the process's pool; the longest first, so that a long text
        does not start last and leave the other threads idle at the end."""
        order = sorted(range(len(pieces)), key=lambda i: -len(pieces[i]))
        runs = _run_pool(self.threads or usable_cores()).map(
            lambda i: session.run(None, _feeds([pieces[i]], len(pieces[i])))[0][0], order)
        out = np.zeros((len(pieces), self.dim), dtype=np.float32)
        out[order] = list(runs)
        return out


def _feeds(batch: list[list[int]], longest: int) -> dict[str, np.ndarray]:
    """The model's inputs for sequences of at most ``longest`` ids, zero-padded."""
    ids = np.zeros((len(batch), longest), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, piece in enumerate(batch):
        ids[row, : len(piece)] = piece
        mask[row, : len(piece)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def _normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32, copy=False)
