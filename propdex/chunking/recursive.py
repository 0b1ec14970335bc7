"""Recursive character chunking on chonkie's RecursiveChunker.

chonkie splits on newlines first, then sentence ends, then punctuation, then spaces, and
merges the pieces up to ``chunk_size`` characters; its chunks tile the text exactly
(``start_index``/``end_index``). This module trims those chunks, folds in slivers and adds
the overlap.

Text whose paragraphs are single lines (Markdown files, the layout reader's PDFs) is packed
by whole paragraphs; a paragraph longer than ``chunk_size`` is split at its sentence ends.
One way for one shape of text: a PDF the layout reader reads is chunked as its Markdown
source would be.
"""

from __future__ import annotations

import functools

from propdex.chunking.base import Chunker, overlap_start, split_oversized, trim_span


class RecursiveChunker(Chunker):
    def __init__(self, chunk_size: int = 800, overlap: int = 0):
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        if not 0 <= overlap < chunk_size:
            raise ValueError(f"overlap must be in [0, chunk_size), got {overlap}")
        self.chunk_size = chunk_size
        self.table_chars = chunk_size
        self.overlap = overlap
        # Spans shorter than this are merged into a neighbour when the result still fits:
        # chonkie leaves the tail of an oversized paragraph ("total.") as its own chunk.
        self.min_span = max(1, chunk_size // 8)

    def split(self, text: str) -> list[tuple[int, int]]:
        spans = self._chonkie_spans(text)
        if self.overlap:
            spans = [
                (overlap_start(text, start, spans[i - 1], self.overlap) if i else start, end)
                for i, (start, end) in enumerate(spans)
            ]
        return spans

    @functools.cached_property
    def _chonkie(self):
        # Made on first use: chonkie imports its every integration (the OpenAI SDK, aiohttp),
        # about a second of CPU, which a process that chunks nothing (search, serve) skips.
        from chonkie import RecursiveChunker as ChonkieRecursiveChunker

        # chonkie's default minimum (24 characters) makes its splitter glue short words into
        # one piece longer than chunk_size, which then gets cut mid-word; 1 keeps word splits.
        return ChonkieRecursiveChunker(
            tokenizer="character", chunk_size=self.chunk_size, min_characters_per_chunk=1
        )

    def _chonkie_spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for chunk in self._chonkie.chunk(text):
            trimmed = trim_span(text, chunk.start_index, chunk.end_index)
            if trimmed is None:
                continue
            for piece in split_oversized(text, trimmed, self.chunk_size):
                if spans and self._merge_fits(spans[-1], piece):
                    spans[-1] = (spans[-1][0], piece[1])
                else:
                    spans.append(piece)
        return spans

    def _merge_fits(self, previous: tuple[int, int], current: tuple[int, int]) -> bool:
        small = min(previous[1] - previous[0], current[1] - current[0]) < self.min_span
        return small and current[1] - previous[0] <= self.chunk_size
