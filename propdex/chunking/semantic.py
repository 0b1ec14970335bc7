"""Semantic chunking: sentences grouped until the embedding similarity of neighbours drops.

Every sentence is embedded with the configured embedder (local MiniLM by default); a new
chunk starts where the cosine similarity between a sentence and the one before it is below
``threshold``, or where adding the sentence would take the chunk over ``chunk_size``
characters (so chunks stay within what the embedder reads).
"""

from __future__ import annotations

import numpy as np

from propdex.chunking.base import Chunker
from propdex.chunking.passages import bounded_sentences
from propdex.embed.base import Embedder


class SemanticChunker(Chunker):
    def __init__(self, embedder: Embedder, threshold: float = 0.25, chunk_size: int = 800):
        self.embedder = embedder
        self.threshold = threshold
        self.chunk_size = chunk_size
        self.table_chars = chunk_size

    def split(self, text: str) -> list[tuple[int, int]]:
        sentences = bounded_sentences(text, self.chunk_size)
        if len(sentences) < 2:
            return sentences
        vectors = self.embedder.embed([text[s:e] for s, e in sentences])
        similarities = neighbour_similarities(vectors)
        spans = [sentences[0]]
        for (start, end), similarity in zip(sentences[1:], similarities, strict=True):
            if similarity < self.threshold or end - spans[-1][0] > self.chunk_size:
                spans.append((start, end))
            else:
                spans[-1] = (spans[-1][0], end)
        return spans


def neighbour_similarities(vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row with the row before it (length n - 1)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1.0, norms)
    return np.einsum("ij,ij->i", unit[1:], unit[:-1])
