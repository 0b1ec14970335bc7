"""The embedder interface: local MiniLM or an OpenAI-compatible embeddings endpoint."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class Embedder(ABC):
    name: str  # recorded as embed_model on every row
    dim: int

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), rows L2-normalised."""

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
