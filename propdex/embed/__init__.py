"""Embedders: local MiniLM (default) or an OpenAI-compatible endpoint."""

from __future__ import annotations

import functools

from propdex.embed.base import Embedder
from propdex.settings import Settings


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "openai":
        from propdex.embed.openai_embed import OpenAIEmbedder

        return OpenAIEmbedder(settings)
    return _minilm(settings.embed_batch_size)


@functools.lru_cache(maxsize=4)
def _minilm(batch_size: int) -> Embedder:
    from propdex.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder(batch_size)


__all__ = ["Embedder", "make_embedder"]
