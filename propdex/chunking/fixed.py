"""Fixed character windows with overlap: the source notebook's baseline (800 / 100 there).

Windows start every ``chunk_size - overlap`` characters and may cut words and sentences:
that is the method being compared against, so no boundary is moved. Each window is only
trimmed of surrounding whitespace, which keeps ``text[start:end]`` exact.
"""

from __future__ import annotations

from propdex.chunking.base import Chunker, trim_span


class FixedChunker(Chunker):
    def __init__(self, chunk_size: int = 800, overlap: int = 0):
        if chunk_size < 1 or not 0 <= overlap < chunk_size:
            raise ValueError(f"need chunk_size >= 1 and 0 <= overlap < chunk_size, got {chunk_size} / {overlap}")
        self.chunk_size = chunk_size
        self.overlap = overlap

    def split(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        step = self.chunk_size - self.overlap
        for start in range(0, len(text), step):
            span = trim_span(text, start, min(start + self.chunk_size, len(text)))
            if span is not None:
                if spans and span[0] <= spans[-1][0]:
                    # A whitespace run longer than the step trimmed two windows to one start.
                    spans[-1] = span
                elif not spans or span[1] > spans[-1][1]:
                    spans.append(span)
            if start + self.chunk_size >= len(text):
                break
        return spans
