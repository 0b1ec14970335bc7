"""Rows of a borderless table that the layout engine cut after each line of a wrapped cell.

In a table without rules between its rows (annual reports set them so: labels left-aligned,
numbers right-aligned, rows set apart by a wider step than the lines inside a row), the
engine's grid often cuts a row whose label wraps after every printed line: "Equipment and
accessories | 2,011 | 1,929" then "sold through our own stores | |", or, with the values on
the row's last line, the label's first lines as rows of their own above it. No option of
PyMuPDF's table finder keeps them together (``strategy="text"`` and its tolerances,
``use_layout``, ``refine``, ``union``: bench/RESULTS.md has what each gives). Rows are joined
back where three things agree:

* **spacing**: the rows' lines follow each other at the table's line pitch, with no rule
  between, and the group is set off from the rows above and below it by a step wider than
  the pitch (or by a rule, or the table's end);
* **the empty cells**: a column filled in two or more of the rows holds text in consecutive
  rows, never a value (a number, a dash: a cell without three letters in a row); other
  columns, such as the numbers, are filled in one of the rows only;
* **the wrap**: in each such column, every line going on in the row below ends with a
  hyphen or where the next line's first word would not have fit in the column (as wide as
  its widest line in the table's body). A row-group header ("Costs") above its one item
  ("Cost of sales | 20,000") is short of that, and stays a row of its own.

Where any of them is missing the rows stay as the engine cut them.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

from propdex.extract.table_rows import (
    MAX_RULE_THICKNESS,
    Rect,
    Rule,
    Word,
    printed_lines,
    ruled_between,
    union,
)

# Steps (top to top) up to this share of the line height above the table's line pitch are
# the pitch: lines of one row. Steps at least ROW_GAP of it wider set rows apart (2.5 pt for
# 9 pt type, whose words PyMuPDF boxes 12.4 pt high); steps in between are neither.
LINE_SLACK = 0.1
ROW_GAP = 0.2
# A text cell has three letters in a row; a value (12.5%, (1,929), n/a, a dash) has none.
_TEXT = re.compile(r"[^\W\d_]{3}")


def _steps(row_lines: Sequence[Sequence]) -> list[float | None]:
    """The step (top to top) from each row's last line to the next row's first line."""
    return [below[0].top - above[-1].top if above and below else None
            for above, below in zip(row_lines, row_lines[1:], strict=False)]


def _pitch(row_lines: Sequence[Sequence], steps: Sequence[float | None], height: float,
           ) -> float | None:
    """The table's line pitch: the smallest step between two lines of its body. A step under
    half a line's height is a raised or lowered word (a footnote mark), not a line."""
    inside = [b.top - a.top for lines in row_lines for a, b in zip(lines, lines[1:], strict=False)]
    candidates = [s for s in [*inside, *steps] if s is not None and s > height / 2]
    return min(candidates, default=None)


def _wraps(above: Sequence, below: Sequence, right: float) -> bool:
    """Whether the cell's last line ``above`` goes on in the first line ``below``: it ends with
    a hyphen, or the next word would have run past the column's ``right`` edge."""
    last, first = above[-1], below[0]
    return last.text.endswith("-") or last.right + first.first_width > right


def _joinable(texts: Sequence[Sequence[str | None]], cells: Sequence[Sequence[Sequence]],
              group: range, rights: Sequence[float]) -> bool:
    """Whether the rows of ``group`` are the lines of one row: some column is filled in two
    or more of them, and every such column holds text in consecutive rows, each line going
    on in the next row by a wrap. ``cells`` are the printed lines of each cell, ``rights``
    each column's right edge."""
    shared = False
    for column in range(len(rights)):
        filled = [row for row in group if (texts[row][column] or "").strip()]
        if len(filled) < 2:
            continue
        shared = True
        if filled != list(range(filled[0], filled[-1] + 1)):
            return False
        if any(not _TEXT.search(texts[row][column] or "") for row in filled):
            return False
        if not all(cells[row][column] and cells[row + 1][column]
                   and _wraps(cells[row][column], cells[row + 1][column], rights[column])
                   for row in filled[:-1]):
            return False
    return shared


def wrapped_rows(texts: Sequence[Sequence[str | None]], rects: Sequence[Sequence[Rect | None]],
                 words: Sequence[Word], rules: Sequence[Rule]) -> list[int]:
    """The body rows (never the header, row 0) that go on with the row above: the second and
    later lines of a logical row the engine cut after each line of a wrapped cell."""
    count = min(len(texts), len(rects))
    width = min((len(rects[row]) for row in range(count)), default=0)
    if count < 3 or width < 2:
        return []
    row_lines = [printed_lines(words, union(rects[row])) if union(rects[row]) else []
                 for row in range(count)]
    steps = _steps(row_lines)
    heights = [line.bottom - line.top for lines in row_lines for line in lines]
    if not heights:
        return []
    height = statistics.median(heights)
    pitch = _pitch(row_lines[1:], steps[1:], height)
    if pitch is None:
        return []
    tight, apart = _links(rects, row_lines, steps, rules, pitch, height)
    if not any(apart):
        return []  # no row set apart from another: the table gives no evidence of its rows
    cells = [[printed_lines(words, rects[row][column]) if rects[row][column] else []
              for column in range(width)] for row in range(count)]
    rights = [max((line.right for row in range(1, count) for line in cells[row][column]),
                  default=0.0) for column in range(width)]
    continued = []
    row = 1
    while row < count:
        end = row
        while end + 1 < count and tight[end]:
            end += 1
        bounded = apart[row - 1] and (end == count - 1 or apart[end])
        if end > row and bounded and _joinable(texts, cells, range(row, end + 1), rights):
            continued += range(row + 1, end + 1)
        row = end + 1
    return continued


def _links(rects: Sequence[Sequence[Rect | None]], row_lines: Sequence[Sequence],
           steps: Sequence[float | None], rules: Sequence[Rule], pitch: float, height: float,
           ) -> tuple[list[bool], list[bool]]:
    """For each pair of neighbouring rows: whether the lower one follows at the line pitch,
    no rule between (tight), and whether a wider step sets them apart (spaced). A rule across
    a column between them counts as spaced once the table has a spaced step at all."""
    width = min(len(row) for row in rects)
    columns = [c for c in (union([row[n] for row in rects]) for n in range(width)) if c]

    def ruled(row: int) -> bool:
        if not row_lines[row] or not row_lines[row + 1]:
            return False
        top, bottom = row_lines[row][-1].bottom, row_lines[row + 1][0].top
        return any(ruled_between(rules, column, top - MAX_RULE_THICKNESS, bottom + MAX_RULE_THICKNESS)
                   for column in columns)

    tight = [step is not None and step <= pitch + LINE_SLACK * height and not ruled(row)
             for row, step in enumerate(steps)]
    spaced = [step is not None and step >= pitch + ROW_GAP * height for step in steps]
    if not any(spaced):
        return tight, spaced
    return tight, [s or ruled(row) for row, s in enumerate(spaced)]
