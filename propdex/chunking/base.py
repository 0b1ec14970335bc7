"""The chunker interface and the span guarantees every chunker keeps."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from propdex.models import Usage

_WORD_START = re.compile(r"(?<=\s)\S")
_SPACE = re.compile(r"\s")


class Chunker(ABC):
    """Splits text into (start, end) character spans.

    Guarantees: spans are in order, non-empty and never whitespace-only;
    ``text[start:end]`` has no leading or trailing whitespace; every non-whitespace
    character lies in some span; with no overlap, spans do not overlap; with overlap, a span
    starts at most ``overlap`` characters before the previous span's end, at a word start.
    """

    # LLM calls and tokens spent by ``split`` so far (only the llm chunker spends any).
    usage: Usage = Usage()
    # Markdown tables are kept whole up to this many characters and split between rows
    # beyond (``propdex.chunking.tables``); None: tables are text like any other.
    table_chars: int | None = None

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
    previous_start, _ = previous
    # Measured from ``start``, not from the previous end: the whitespace between two spans
    # must not let a span grow by more than ``overlap`` characters.
    earliest = max(start - overlap, previous_start + 1)
    if overlap <= 0 or earliest >= start:
        return start
    match = _WORD_START.search(text, earliest, start)
    return match.start() if match else start


def split_oversized(text: str, span: tuple[int, int], limit: int) -> list[tuple[int, int]]:
    """``span`` cut into trimmed pieces of at most ``limit`` characters, at the last whitespace
    that fits, or mid-word when a single word is longer than ``limit``.

    chonkie's merge step can glue a short word onto a piece that already fills the window
    (seen with "000 0 00000000000000 0000." at small sizes), so its chunks are not trusted to fit.
    """
    start, end = span
    pieces: list[tuple[int, int]] = []
    while end - start > limit:
        cut = start + limit
        spaces = [m.start() for m in _SPACE.finditer(text, start + 1, cut + 1)]
        if spaces:
            cut = spaces[-1]
        piece = trim_span(text, start, cut)
        if piece is not None:
            pieces.append(piece)
        rest = trim_span(text, cut, end)
        if rest is None:
            return pieces
        start = rest[0]
    pieces.append((start, end))
    return pieces
