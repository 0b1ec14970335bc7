"""Embeddings for chunks (header + text) and propositions, through the content cache."""

from __future__ import annotations

import numpy as np

from propdex.cache import ResultCache
from propdex.embed.base import Embedder


def embed_with_cache(
    texts: list[str], embedder: Embedder, cache: ResultCache, batch_size: int = 1024
) -> tuple[np.ndarray, int]:
    """Vectors for ``texts`` and how many had to be computed (the rest came from the cache).

    ``batch_size`` texts go to the embedder at once and are then stored, so a run killed
    mid-way keeps what it computed; the embedder batches further by itself (the endpoint by
    ``embed_batch_size``, the local model by word pieces after sorting by length)."""
    vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    cached = cache.get_embeddings(embedder.cache_name, texts)
    for position, vector in cached.items():
        vectors[position] = vector
    missing = [i for i in range(len(texts)) if i not in cached]
    # Identical texts (repeated boilerplate) are embedded once.
    unique = list(dict.fromkeys(texts[i] for i in missing))
    computed: dict[str, np.ndarray] = {}
    for start in range(0, len(unique), batch_size):
        batch = unique[start : start + batch_size]
        batch_vectors = embedder.embed(batch)
        # Stored batch by batch: a run killed mid-way keeps what it already computed.
        cache.put_embeddings(embedder.cache_name, batch, batch_vectors)
        computed.update(zip(batch, batch_vectors, strict=True))
    for i in missing:
        vectors[i] = computed[texts[i]]
    return vectors, len(unique)
