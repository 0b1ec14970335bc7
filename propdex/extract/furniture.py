"""Page furniture: running headers, running footers and page numbers of a PDF, for both
readers (fast mode's text lines, the layout engine's lines).

A line is furniture when it lies in the top or bottom band of the page and the same line,
with its digits normalised ("Page 3 of 19" = "Page 7 of 19"; short lines only), lies in the
same band on enough of the document's pages. A heading printed once, or a line repeated in the body,
never qualifies, and neither does anything in a one-page document. An occurrence set much
larger than the others (a title page repeating the running title in display type) is kept.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

from propdex.extract.layout import Block

# Share of the page height searched at the top and at the bottom. Running heads and folios
# sit within the outer 8% of a page in the usual layouts (A4, Letter, arXiv, 10-K filings).
BAND = 0.1
# A line is running furniture when it repeats on at least this share of the pages (and on
# two pages at least): below one half, so headers alternating between left and right pages
# (title on odd pages, authors on even ones) still count.
MIN_PAGE_SHARE = 0.4
# An occurrence whose line pitch exceeds the usual one by this factor is display type.
_DISPLAY_TYPE = 1.3
# Lines that repeat only once their numbers are normalised are furniture when short ("Page 3
# of 19", "Annual Report 2023 | 12"); a longer one is a record's first line ("Logbook page 3
# records sample 3 from the plateau") that happens to sit at the top of every page.
MAX_NUMBERED_CHARS = 40

_DIGITS = re.compile(r"\d+")
_ROMAN_NUMERAL = re.compile(r"(?i)^[ivxlcdm]+$")


@dataclass(frozen=True)
class PageLines:
    """One page as the furniture detector sees it."""

    height: float
    top: float  # the page's y0 (usually 0)
    blocks: list[Block]


def furniture_key(line: str) -> str:
    """A line as compared across pages: case, spacing, numbers and roman numerals aside."""
    words = line.lower().split()
    words = ["#" if _ROMAN_NUMERAL.match(w) else w for w in words]
    return _DIGITS.sub("#", " ".join(words))


def _band_lines(page: PageLines):
    """(block index, line index, line, band, pitch) of each line lying in the top or bottom
    band; a line's box is its block's box cut into equal slices, exact for one-line blocks."""
    top_edge = page.top + BAND * page.height
    bottom_edge = page.top + (1 - BAND) * page.height
    for block_index, block in enumerate(page.blocks):
        if top_edge < block.y0 and block.y1 < bottom_edge:
            continue
        pitch = block.line_pitch
        for line_index, line in enumerate(block.lines):
            y0 = block.y0 + line_index * pitch
            if y0 + pitch <= top_edge:
                yield block_index, line_index, line, "top", pitch
            elif y0 >= bottom_edge:
                yield block_index, line_index, line, "bottom", pitch


def find_furniture(pages: list[PageLines]) -> list[set[tuple[int, int]]]:
    """Per page, the (block index, line index) of its furniture lines."""
    removed: list[set[tuple[int, int]]] = [set() for _ in pages]
    if len(pages) < 2:
        return removed
    occurrences: dict[tuple[str, str], list[tuple[int, int, int, float]]] = {}
    spellings: dict[tuple[str, str], set[str]] = {}
    for page_index, page in enumerate(pages):
        for block_index, line_index, line, band, pitch in _band_lines(page):
            key = furniture_key(line)
            if key:
                occurrences.setdefault((band, key), []).append(
                    (page_index, block_index, line_index, pitch)
                )
                spellings.setdefault((band, key), set()).add(line.strip())
    needed = max(2, math.ceil(MIN_PAGE_SHARE * len(pages)))
    for band_key, found in occurrences.items():
        if len({page_index for page_index, *_ in found}) < needed:
            continue
        lines = spellings[band_key]
        if len(lines) > 1 and max(map(len, lines)) > MAX_NUMBERED_CHARS:
            continue
        usual = statistics.median(pitch for *_, pitch in found)
        for page_index, block_index, line_index, pitch in found:
            if pitch <= usual * _DISPLAY_TYPE:
                removed[page_index].add((block_index, line_index))
    return removed


def page_text(blocks: list[Block], removed: set[tuple[int, int]]) -> str:
    """The page's text as MuPDF writes it (a newline after every line), furniture left out."""
    if not removed:
        return "".join(block.text for block in blocks)
    touched = {block_index for block_index, _ in removed}
    return "".join(
        block.text if block_index not in touched else "".join(
            line + "\n" for line_index, line in enumerate(block.lines)
            if (block_index, line_index) not in removed
        )
        for block_index, block in enumerate(blocks)
    )
