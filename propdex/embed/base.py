"""The embedder interface: local MiniLM or an OpenAI-compatible embeddings endpoint."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod

import numpy as np


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Embedder(ABC):
    name: str  # recorded as embed_model on every row
    dim: int

    @property
    def cache_name(self) -> str:
        """The model part of embedding-cache keys: differs from ``name`` when two embedders
        record the same model but turn some texts into different vectors."""
        return self.name

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), rows L2-normalised."""

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def truncated(self, texts: list[str]) -> int | None:
        """How many of ``texts`` the embedder cannot read whole (their tails never reach the
        vector); None when it cannot tell (a remote endpoint)."""
        return None
