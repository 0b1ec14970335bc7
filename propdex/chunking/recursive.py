"""Recursive character chunking on chonkie's RecursiveChunker.

chonkie splits on newlines first, then sentence ends, then punctuation, then spaces, and
merges the pieces up to ``chunk_size`` characters; its chunks tile the text exactly
(``start_index``/``end_index``). This module trims those chunks, folds in slivers and adds
the overlap.

Text whose paragraphs are single lines (the layout reader's: the engine gives each
paragraph as one box) offers chonkie no line level between paragraphs and sentences: it
packs whole paragraphs, so a chunk ends wherever the next paragraph does not fit (chunks
of the corpus papers a fifth shorter than from wrapped lines) and a long paragraph's last
sentence is left on its own. With ``pack_sentences`` the chunker fills each chunk with
sentences up to ``chunk_size`` instead, across paragraph breaks, so chunks are as full as
from wrapped lines and still end at a sentence end.
"""

from __future__ import annotations

import functools

from propdex.chunking.base import Chunker, overlap_start, split_oversized, trim_span


class RecursiveChunker(Chunker):
    def __init__(self, chunk_size: int = 800, overlap: int = 0, pack_sentences: bool = False):
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        if not 0 <= overlap < chunk_size:
            raise ValueError(f"overlap must be in [0, chunk_size), got {overlap}")
        self.chunk_size = chunk_size
        self.table_chars = chunk_size
        self.overlap = overlap
        self.pack_sentences = pack_sentences
        # Spans shorter than this are merged into a neighbour when the result still fits:
        # chonkie leaves the tail of an oversized paragraph ("total.") as its own chunk.
        self.min_span = max(1, chunk_size // 8)

    def split(self, text: str) -> list[tuple[int, int]]:
        spans = self._sentence_spans(text) if self.pack_sentences else self._chonkie_spans(text)
        if self.overlap:
            spans = [
                (overlap_start(text, start, spans[i - 1], self.overlap) if i else start, end)
                for i, (start, end) in enumerate(spans)
            ]
        return spans

    def _sentence_spans(self, text: str) -> list[tuple[int, int]]:
        # Imported here: passages imports this module.
        from propdex.chunking.passages import bounded_sentences

        spans: list[tuple[int, int]] = []
        for start, end in bounded_sentences(text, self.chunk_size):
            if spans and end - spans[-1][0] <= self.chunk_size:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        return spans

    @functools.cached_property
    def _chonkie(self):
        # Made on first use: chonkie imports its every integration (the OpenAI SDK, aiohttp),
        # about a second of CPU, and packing sentences needs it only for a sentence longer
        # than chunk_size.
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
