"""Embedders: local MiniLM (ONNX Runtime by default, or sentence-transformers on torch) or an
OpenAI-compatible endpoint."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from propdex.embed.base import Embedder

if TYPE_CHECKING:  # the settings (pydantic) stay out of processes that only need plain_text
    from propdex.settings import Settings


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "openai":
        from propdex.embed.openai_embed import OpenAIEmbedder

        return OpenAIEmbedder(settings)
    if settings.embedder == "e5-small":
        return _e5_small()
    if settings.embed_runtime == "torch":
        return _minilm_torch(settings.embed_batch_size)
    return _minilm_onnx(settings.onnx_path, settings.minilm_precision, settings.embed_threads)


# One embedder per configuration and process: the model loads once and runs shared.
@functools.lru_cache(maxsize=4)
def _minilm_torch(batch_size: int) -> Embedder:
    from propdex.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder(batch_size)


@functools.lru_cache(maxsize=4)
def _minilm_onnx(onnx_dir: Path, precision: str, threads: int) -> Embedder:
    from propdex.embed.onnx_minilm import OnnxMiniLMEmbedder

    return OnnxMiniLMEmbedder(onnx_dir, precision, threads)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1)
def _e5_small() -> Embedder:
    from propdex.embed.e5_small import E5SmallEmbedder

    return E5SmallEmbedder()


__all__ = ["Embedder", "make_embedder"]
