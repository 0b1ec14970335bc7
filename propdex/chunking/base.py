"""The chunker interface and the span guarantees every chunker keeps."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

_WORD_START = re.compile(r"(?<=\s)\S")


class Chunker(ABC):
    """Splits text into (start, end) character spans.

    Guarantees: spans are in order, non-empty and never whitespace-only;
    ``text[start:end]`` has no leading or trailing whitespace; every non-whitespace
    character lies in some span; with no overlap, spans do not overlap; with overlap, a span
    starts at most ``overlap`` characters before the previous span's end, at a word start.
    """

    @abstractmethod
    def split(self, text: str) -> list[tuple[int, int]]: ...


def trim_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """(start, end) moved inward past whitespace; None when nothing else is left."""
    piece = text[start:end]
    stripped = piece.lstrip()
    if not stripped:
        return None
    start += len(piece) - len(stripped)
    end -= len(stripped) - len(stripped.rstrip())
    return start, end


def overlap_start(text: str, start: int, previous: tuple[int, int], overlap: int) -> int:
    """Where a span beginning at ``start`` begins when it repeats up to ``overlap`` characters
    of the previous span: the first word start in that window, else ``start`` unchanged."""
    previous_start, previous_end = previous
    earliest = max(previous_end - overlap, previous_start + 1)
    if overlap <= 0 or earliest >= start:
        return start
    match = _WORD_START.search(text, earliest, start)
    return match.start() if match else start
