"""A PDF page as text blocks in reading order, with the bounding boxes PyMuPDF gives: the
fast reader's column handling (the layout reader gets reading order from PyMuPDF's layout
engine, which read the corpus's two-column pages in the same order).

MuPDF returns blocks in the order of the page's content stream, which is the reading order
for almost every producer. Two-column pages are the exception: some producers write the
columns' paragraphs alternately, or a whole page line by line across both columns, and
MuPDF then interleaves the columns (merging the second kind into one block whose lines
alternate). Reading a page at line level costs about half again its plain text extraction,
so it is done only for the pages where the blocks show one of these two patterns; every
other page keeps MuPDF's block order and text unchanged.

MuPDF's own column segmentation (``TEXT_SEGMENT``) is not used: it costs four to five times
the plain extraction and leaves the columns interleaved when a full-width title or
paragraph shares the page with them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pymupdf


@dataclass(frozen=True)
class Block:
    """Lines MuPDF grouped together, top to bottom, as MuPDF writes them: ``text`` has a
    newline after every line. Lines are split out only where needed (most blocks are only
    ever joined back into the page text)."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str

    @property
    def line_count(self) -> int:
        return self.text.count("\n")

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")[:-1]

    @property
    def line_pitch(self) -> float:
        return (self.y1 - self.y0) / self.line_count


# A prose block: what a column of body text is made of (table cells and figure labels are
# shorter and must not make a page look two-column).
_PROSE_CHARS = 100
# A block holding lines of both columns spans the page while its lines are half as long:
# its longest line, estimated from its characters at 0.4 line pitches each (the width of an
# average character is about 0.4 of the line pitch), falls short of the block's width. For
# prose in one column the estimate is 0.8-1.4 of the width.
_CHAR_WIDTH_PER_PITCH = 0.4
_MIXED_LINE_SHARE = 0.6
_MIXED_MIN_LINES = 4
_MIXED_MIN_LINE_CHARS = 20
# Column prose has lines of even length (the median at 0.8 of the longest or more); the
# blocks of references and table rows that also span the page with short lines do not, and
# reading them line by line would cost time for nothing.
_EVEN_LINES = 0.8
# The gutter is looked for in the middle of the text area, where two columns meet.
_GUTTER_ZONE = (0.3, 0.7)
_GUTTER_STEP = 2.0  # points
_MIN_COLUMN_LINES = 3
# Lines of a prose column fill most of its width; the cells of a table (which MuPDF reads
# row by row, as it should be read) leave most of each side of the page empty.
_PROSE_FILL = 0.6


def page_blocks(textpage: pymupdf.TextPage) -> list[Block]:
    """The page's text blocks in reading order: MuPDF's order, or column by column when
    MuPDF interleaved two columns. Joined with a newline after every line they give
    ``textpage.extractText()`` exactly (or its lines reordered)."""
    blocks = [
        Block(x0, y0, x1, y1, text if text.endswith("\n") else text + "\n")
        for x0, y0, x1, y1, text, _number, kind in textpage.extractBLOCKS()
        if kind == 0 and text
    ]
    if not looks_interleaved(blocks):
        return blocks
    return columns_in_order(_line_blocks(textpage.extractDICT())) or blocks


def looks_interleaved(blocks: list[Block]) -> bool:
    """Whether MuPDF may have mixed two columns: a block holding lines of both columns, or a
    right-column paragraph read before a left-column one of the same band of columns
    (beside or below it, with no full-width block between them)."""
    if not blocks:
        return False
    x_min = min(b.x0 for b in blocks)
    x_max = max(b.x1 for b in blocks)
    middle = (x_min + x_max) / 2
    tolerance = 0.02 * (x_max - x_min)
    spanning = [b for b in blocks if b.x0 < middle - tolerance and b.x1 > middle + tolerance]
    right_seen: list[Block] = []
    for block in blocks:
        if _mixes_columns(block, middle):
            return True
        if len(block.text) - block.line_count < _PROSE_CHARS:
            continue
        if block.x0 >= middle - tolerance:
            right_seen.append(block)
        elif block.x1 <= middle + tolerance and any(
            not any(right.y1 - tolerance <= s.y0 and s.y1 <= block.y0 + tolerance for s in spanning)
            for right in right_seen
        ):
            return True
    return False


def _mixes_columns(block: Block, middle: float) -> bool:
    count = block.line_count
    if count < _MIXED_MIN_LINES or not block.x0 < middle < block.x1:
        return False
    lengths = [len(line) for line in block.lines]
    longest = max(lengths)
    if sum(lengths) / count < _MIXED_MIN_LINE_CHARS or statistics.median(lengths) < _EVEN_LINES * longest:
        return False
    return longest * _CHAR_WIDTH_PER_PITCH * block.line_pitch < _MIXED_LINE_SHARE * (block.x1 - block.x0)


def _line_blocks(page_dict: dict) -> list[tuple[Block, bool]]:
    """Every line as a one-line block with its own box, in MuPDF's order; the flag says
    whether it runs left to right (rotated margin text does not)."""
    lines = []
    for block in page_dict.get("blocks", []):
        for line in block.get("lines", []):
            x0, y0, x1, y1 = line["bbox"]
            text = "".join(span["text"] for span in line["spans"])
            lines.append((Block(x0, y0, x1, y1, text + "\n"), line["dir"] == (1.0, 0.0)))
    return lines


def _find_gutter(lines: list[Block]) -> float | None:
    """The x in the middle of the text area crossed by the fewest lines, when lines of prose
    on both sides of it share vertical space (two columns); None when there is no such x."""
    x_min = min(b.x0 for b in lines)
    x_max = max(b.x1 for b in lines)
    width = x_max - x_min
    best: tuple[int, float, float] | None = None
    x = x_min + _GUTTER_ZONE[0] * width
    centre = x_min + width / 2
    while x <= x_min + _GUTTER_ZONE[1] * width:
        crossing = sum(1 for b in lines if b.x0 < x < b.x1)
        key = (crossing, abs(x - centre), x)
        if best is None or key < best:
            best = key
        x += _GUTTER_STEP
    if best is None:
        return None
    gutter = best[2]
    left = [b for b in lines if b.x1 <= gutter]
    right = [b for b in lines if b.x0 >= gutter]
    if len(left) < _MIN_COLUMN_LINES or len(right) < _MIN_COLUMN_LINES:
        return None
    if best[0] > (len(left) + len(right)) / 2:
        return None  # most lines cross it: one column with a few short lines
    if not (_is_prose_column(left) and _is_prose_column(right)):
        return None
    side_by_side = any(r.y0 < l.y1 and l.y0 < r.y1 for l in left for r in right)
    return gutter if side_by_side else None


def _is_prose_column(lines: list[Block]) -> bool:
    width = max(b.x1 for b in lines) - min(b.x0 for b in lines)
    return statistics.median(b.x1 - b.x0 for b in lines) >= _PROSE_FILL * width


def columns_in_order(lines: list[tuple[Block, bool]]) -> list[Block] | None:
    """Lines column by column: lines crossing the gutter (titles, full-width paragraphs)
    cut the page into bands read top to bottom; in each band the left column comes before
    the right one, each in MuPDF's order. Rotated lines go last. None: no two columns."""
    horizontal = [b for b, straight in lines if straight]
    rotated = [b for b, straight in lines if not straight]
    if not horizontal:
        return None
    gutter = _find_gutter(horizontal)
    if gutter is None:
        return None
    spanning = sorted((b for b in horizontal if b.x0 < gutter < b.x1), key=lambda b: b.y0)
    bands: list[tuple[list[Block], list[Block]]] = [([], []) for _ in range(len(spanning) + 1)]
    for block in horizontal:
        if block.x0 < gutter < block.x1:
            continue
        band = sum(1 for s in spanning if s.y0 < block.y0)
        bands[band][0 if block.x1 <= gutter else 1].append(block)
    ordered: list[Block] = []
    for index, (left, right) in enumerate(bands):
        ordered += left + right
        if index < len(spanning):
            ordered.append(spanning[index])
    return ordered + rotated
