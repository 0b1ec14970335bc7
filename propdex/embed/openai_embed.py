"""Embeddings from an OpenAI-compatible /v1/embeddings endpoint.

Texts go out in batches of ``embed_batch_size`` with the same retry policy as the chat calls;
vectors come back L2-normalised so cosine similarity is a dot product, like the local model.
"""

from __future__ import annotations

import threading

import numpy as np

from propdex.embed.base import Embedder
from propdex.errors import LLMError
from propdex.llm.client import (
    OPENAI_BASE_URL,
    api_key_value,
    call_with_retries,
    display_url,
    read_response,
)
from propdex.llm.openai_clients import SharedClientUser
from propdex.settings import Settings

# Dimensions of well-known models, so ``dim`` is known before the first request.
KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# The API rejects empty strings; an empty text is sent as one space instead.
EMPTY_STAND_IN = " "
DIM_PROBE_TEXT = "dimension probe"


class OpenAIEmbedder(SharedClientUser, Embedder):
    """``Embedder`` over an OpenAI-compatible server; thread-safe."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.name = settings.embed_model_name
        base_url = settings.embed_base_url or settings.llm_base_url or OPENAI_BASE_URL
        self.base_url = base_url.rstrip("/")
        self._secret = api_key_value(settings.embed_api_key or settings.llm_api_key)
        self._dim: int | None = KNOWN_DIMS.get(self.name)
        self._dim_lock = threading.Lock()
        self._probe_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.name!r}, base_url={display_url(self.base_url)!r})"

    @property
    def dim(self) -> int:
        """The vector size: from the table of known models, else learned from one request."""
        if self._dim is None:
            with self._probe_lock:  # one probe, however many documents' stages ask at once
                if self._dim is None:
                    self.embed([DIM_PROBE_TEXT])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        size = self.settings.embed_batch_size
        parts = [self._embed_batch(texts[i : i + size]) for i in range(0, len(texts), size)]
        return np.vstack(parts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        batch = [text if text.strip() else EMPTY_STAND_IN for text in texts]

        def send():
            # Floats, not the client's default base64: not every compatible server has it.
            return read_response(lambda: self._client.embeddings.create(
                model=self.name, input=batch, encoding_format="float"
            ))

        response = call_with_retries(
            send,
            what="embeddings request",
            model=self.name,
            base_url=self.base_url,
            secret=self._secret,
            max_attempts=self.settings.llm_max_attempts,
            backoff_max=self.settings.llm_backoff_max,
            timeout=self.settings.llm_timeout,
            unreachable_cooldown=self.settings.llm_unreachable_cooldown_s,
        )
        items = sorted(response.data, key=lambda item: item.index)
        if len(items) != len(batch):
            raise LLMError(
                f"embeddings request: sent {len(batch)} texts, got {len(items)} vectors back"
            )
        vectors = np.asarray([item.embedding for item in items], dtype=np.float32)
        self._check_dim(vectors.shape[1])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)

    def _check_dim(self, dim: int) -> None:
        with self._dim_lock:
            if self._dim is None:
                self._dim = dim
            elif dim != self._dim:
                raise LLMError(
                    f"embeddings from {self.name!r} have {dim} dimensions, expected {self._dim}"
                )
