"""Table rows the layout engine's grid cuts wrongly: a cell printed across several rows, and
a row whose multi-line cell the grid cut in two.

The engine's table grid (pymupdf4llm: a prediction of row and column lines, every line across
the whole table) has no spanning cells. A row-group label centred over its rows ("(A)" over
four rows of attention's Table 3) lands in one of them, or is cut by a row line into pieces
("A" above, "()" below, each character going to the row holding its centre), and the other
rows of the group lose it. A cell of several lines can get a row line through it where the
cells beside it have a paragraph break (levels_of_agi's Table 2), and the row is stated in
two halves. PyMuPDF's table finder reports row spans only from a full grid of ruled cells
(``strategy="lines"``, which needs vertical rules as well); in the mode refined by the layout
engine (``use_layout=True``) it gave row span 1 to "(A)" in Table 3 and in a table ruled
around every cell. So the page's horizontal rules are read here: they bound a cell's rows.

* A **spanning cell**: in one column, between two rules crossing it, two or more grid rows
  hold fewer printed lines than rows, set vertically centred on those rows; the text is read
  whole and given to each of the rows. That is a group label in the table's first column,
  or any cell whose lines a row line cuts through (not a value that is merely alone in the
  middle row of a group). Without rules, a line the grid cut goes to the rows it lies on.
* A **continuation row**, merged into the row above, in a table with rules between rows: a
  cell of two lines or more goes on in it at its own line pitch (no paragraph break), no rule
  between them, and the first filled column of the row above is empty in it or goes on the
  same way; or it fills only some columns, each under a cell of two lines or more with no
  rule between. Rows of one line each (Table 3's inside a group) stay apart. In a table
  without rules between rows, a cell's lines going on at the pitch into the next row are as
  likely that row's own ("Footwear, including running, / basketball shoes | 29,143" over
  "Apparel | 13,843", set without a gap): ``propdex.extract.table_wraps`` joins rows there,
  on stricter evidence.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pymupdf

Rect = tuple[float, float, float, float]
# A word as PyMuPDF's ``get_text("words")`` gives it: (x0, y0, x1, y1, text, ...).
Word = tuple

# A horizontal stroke thinner than this is a rule; a rectangle's top and bottom edges are too.
MAX_RULE_THICKNESS = 2.0
# A rule bounds a column's cells when it crosses this share of the column's width.
RULE_COVER = 0.5
# Lines of one paragraph follow each other at the cell's line pitch; a paragraph break adds
# a blank line (twice the pitch). This much more than the pitch still continues a paragraph.
PITCH_SLACK = 0.15
# A spanning cell's text is centred on its rows within this share of its line height.
CENTRE_TOLERANCE = 0.35
# A row line cuts a printed line when it passes this share of the line's height inside it.
CUT_DEPTH = 0.2


@dataclass(frozen=True)
class Rule:
    """A horizontal rule of the page: from ``x0`` to ``x1`` at height ``y``."""

    x0: float
    x1: float
    y: float


@dataclass(frozen=True)
class SpanningCell:
    """The cell of ``column`` printed across rows ``first`` to ``last``."""

    column: int
    first: int
    last: int


def horizontal_rules(page: pymupdf.Page) -> list[Rule]:
    """The page's horizontal rules: lines, thin bars and the top and bottom edges of
    rectangles (a ruled cell, a shaded row)."""
    rules = []
    for drawing in page.get_drawings():
        for item in drawing["items"]:
            if item[0] == "l" and abs(item[1].y - item[2].y) <= MAX_RULE_THICKNESS:
                start, end = sorted((item[1].x, item[2].x))
                rules.append(Rule(start, end, (item[1].y + item[2].y) / 2))
            elif item[0] == "re" and item[1].height <= MAX_RULE_THICKNESS:
                rules.append(Rule(item[1].x0, item[1].x1, (item[1].y0 + item[1].y1) / 2))
            elif item[0] == "re":
                rules += [Rule(item[1].x0, item[1].x1, item[1].y0),
                          Rule(item[1].x0, item[1].x1, item[1].y1)]
    return rules


def _crosses(rule: Rule, column: Rect) -> bool:
    width = column[2] - column[0]
    return min(rule.x1, column[2]) - max(rule.x0, column[0]) >= RULE_COVER * width


def ruled_between(rules: Sequence[Rule], column: Rect, top: float, bottom: float) -> bool:
    """Whether a rule crossing ``column`` lies between heights ``top`` and ``bottom``."""
    return any(top < rule.y < bottom and _crosses(rule, column) for rule in rules)


@dataclass(frozen=True)
class PrintedLine:
    """A printed line of words: its top and bottom, the right edge of its last word, the
    width of its first word and its text."""

    top: float
    bottom: float
    right: float
    first_width: float
    text: str


def printed_lines(words: Sequence[Word], rect: Rect) -> list[PrintedLine]:
    """The printed lines of the words whose centre lies in ``rect``, top down."""
    x0, y0, x1, y1 = rect
    inside = sorted(
        (w for w in words if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1),
        key=lambda w: (w[1], w[3]),
    )
    lines: list[list[Word]] = []
    for w in inside:
        # A word whose middle lies above the bottom of the line so far is on that line.
        if lines and w[1] + (w[3] - w[1]) / 2 <= max(v[3] for v in lines[-1]):
            lines[-1].append(w)
        else:
            lines.append([w])
    result = []
    for line in lines:
        line.sort(key=lambda w: w[0])
        result.append(PrintedLine(min(w[1] for w in line), max(w[3] for w in line),
                                  max(w[2] for w in line), line[0][2] - line[0][0],
                                  " ".join(w[4] for w in line)))
    return result


def cell_lines(words: Sequence[Word], rect: Rect) -> list[tuple[float, float]]:
    """The printed lines (top, bottom) of the words whose centre lies in ``rect``, top down."""
    return [(line.top, line.bottom) for line in printed_lines(words, rect)]


def _goes_on(above: list[tuple[float, float]], below: list[tuple[float, float]]) -> bool:
    """Whether the lines ``below`` continue the paragraph of the two or more lines ``above``:
    the first of them follows at the line pitch of those above."""
    pitch = statistics.median(b[0] - a[0] for a, b in zip(above, above[1:], strict=False))
    return 0 < below[0][0] - above[-1][0] <= pitch * (1 + PITCH_SLACK)


def continuation_rows(texts: Sequence[Sequence[str | None]], rects: Sequence[Sequence[Rect | None]],
                      words: Sequence[Word], rules: Sequence[Rule]) -> list[int]:
    """The rows (by index, never the first) of a table with rules between its rows that go
    on with the row above: a cell of two lines or more goes on at its line pitch, and the
    first filled column of the row above is empty or goes on too; or the row fills only some
    columns, each under a cell of two lines or more. Without rules between rows, lines at the
    pitch are as likely the next row (``propdex.extract.table_wraps`` decides there)."""
    width = min((len(r) for r in rects), default=0)
    whole = union([box for row in rects for box in row])
    ruled = whole is not None and any(
        ruled_between(rules, column, whole[1] + MAX_RULE_THICKNESS, whole[3] - MAX_RULE_THICKNESS)
        for column in (union([row[n] for row in rects]) for n in range(width)) if column)
    continued = []
    for row in range(1, min(len(texts), len(rects))):
        going_on, under = set(), set()
        for column in range(width):
            upper, lower = rects[row - 1][column], rects[row][column]
            if upper is None or lower is None:
                continue
            above, below = cell_lines(words, upper), cell_lines(words, lower)
            if len(above) < 2 or not below or ruled_between(rules, upper, above[-1][1], below[0][0]):
                continue
            under.add(column)
            if _goes_on(above, below):
                going_on.add(column)
        filled_above = [n for n, text in enumerate(texts[row - 1]) if (text or "").strip()]
        filled = {n for n, text in enumerate(texts[row]) if (text or "").strip()}
        if not filled_above or not filled:
            continue
        lead = filled_above[0]
        if ruled and going_on and (lead in going_on or lead not in filled):
            continued.append(row)
        elif ruled and lead not in filled and len(filled) < width and filled <= under:
            continued.append(row)
    return continued


def merge_rows(texts: Sequence[Sequence[str | None]], rects: Sequence[Sequence[Rect | None]],
               continued: Sequence[int]) -> tuple[list[list[str | None]], list[list[Rect | None]]]:
    """The rows with each row of ``continued`` joined to the one above: the cells' lines in
    reading order (above, then below), their rectangles united."""
    merged_texts: list[list[str | None]] = []
    merged_rects: list[list[Rect | None]] = []
    for row, (cells, boxes) in enumerate(zip(texts, rects, strict=False)):
        if row not in continued or not merged_texts:
            merged_texts.append(list(cells))
            merged_rects.append(list(boxes))
            continue
        last_texts, last_rects = merged_texts[-1], merged_rects[-1]
        for column, (text, box) in enumerate(zip(cells, boxes, strict=False)):
            if column >= len(last_texts):
                continue
            parts = [p for p in (last_texts[column], text) if (p or "").strip()]
            last_texts[column] = "\n".join(parts)
            last_rects[column] = union([last_rects[column], box])
    return merged_texts, merged_rects


def union(rects: Sequence[Rect | None]) -> Rect | None:
    """The rectangle ``rects`` span, gaps (None) left out; None when there is none."""
    boxes = [c for c in rects if c]
    if not boxes:
        return None
    return (float(min(c[0] for c in boxes)), float(min(c[1] for c in boxes)),
            float(max(c[2] for c in boxes)), float(max(c[3] for c in boxes)))


def _bands(rules: Sequence[Rule], column: Rect) -> list[tuple[float, float, bool]]:
    """``column`` cut by the rules crossing it: (top, bottom, whether a rule bounds it on
    both sides) of each stretch."""
    top, bottom = column[1], column[3]
    ys = sorted({r.y for r in rules if top - MAX_RULE_THICKNESS <= r.y <= bottom + MAX_RULE_THICKNESS
                 and _crosses(r, column)})
    inner = [y for y in ys if top < y < bottom]
    edges = [top, *inner, bottom]
    ruled_top = bool(ys) and ys[0] <= top + MAX_RULE_THICKNESS
    ruled_bottom = bool(ys) and ys[-1] >= bottom - MAX_RULE_THICKNESS
    bands = []
    for n, (upper, lower) in enumerate(zip(edges, edges[1:], strict=False)):
        ruled = (n > 0 or ruled_top) and (n < len(edges) - 2 or ruled_bottom)
        bands.append((upper, lower, ruled))
    return bands


def _cut(lines: Sequence[tuple[float, float]], boundaries: Sequence[float]) -> bool:
    """Whether a row line passes through one of ``lines``."""
    return any(top + CUT_DEPTH * (bottom - top) < y < bottom - CUT_DEPTH * (bottom - top)
               for top, bottom in lines for y in boundaries)


def spanning_cells(rects: Sequence[Sequence[Rect | None]], words: Sequence[Word],
                   rules: Sequence[Rule], body: int) -> list[SpanningCell]:
    """The cells printed across two or more rows from row ``body`` on (the rows above are
    the header)."""
    rows = list(range(body, len(rects)))
    if len(rows) < 2:
        return []
    width = min(len(rects[row]) for row in rows)
    found = []
    for column in range(width):
        boxes = [rects[row][column] for row in rows]
        if any(box is None for box in boxes):
            continue
        for top, bottom, ruled in _bands(rules, union(boxes)):
            inside = [row for row in rows
                      if top <= (rects[row][column][1] + rects[row][column][3]) / 2 <= bottom]
            found += _spans_in_band(rects, words, column, inside, ruled)
    return found


def _spans_in_band(rects, words, column: int, inside: list[int], ruled: bool) -> list[SpanningCell]:
    if len(inside) < 2:
        return []
    extent = union([rects[row][column] for row in inside])
    lines = cell_lines(words, extent)
    boundaries = [rects[row][column][1] for row in inside[1:]]
    if ruled and 0 < len(lines) < len(inside) and (column == 0 or _cut(lines, boundaries)):
        height = min(bottom - top for top, bottom in lines)
        middle = (lines[0][0] + lines[-1][1]) / 2
        if abs(middle - (extent[1] + extent[3]) / 2) <= CENTRE_TOLERANCE * height:
            return [SpanningCell(column, inside[0], inside[-1])]
    # Otherwise the cell's extent is unknown: a line the grid cut goes to the rows it lies on.
    found = []
    for top, bottom in lines:
        if not _cut([(top, bottom)], boundaries):
            continue
        on = [row for row in inside
              if top < rects[row][column][3] and bottom > rects[row][column][1]]
        found.append(SpanningCell(column, on[0], on[-1]))
    return found
