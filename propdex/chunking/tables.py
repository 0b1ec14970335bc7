"""Markdown pipe tables in document text: found, kept whole in one chunk, or split between rows.

The layout reader stores a table as a Markdown pipe table: consecutive lines starting with
"|", the second being the "|---|" separator row. Its caption is the paragraph next to it
(before, else after) that starts with "Table N"; a caption wrapped over two paragraphs
("Table 4: ... Section 23" / "of WSJ)") is found one short paragraph away. A table and its
caption form one block that never shares a chunk with prose, so a chunk about the table is
only about the table.

A block longer than the chunk size is split between rows, never inside a row (a single row
longer than the chunk size is a chunk of its own). Chunk text must slice the document text
exactly, so the header rows cannot be repeated inside a later part: each part carries what
it lacks of the caption and the header rows in ``TablePiece.head``, which goes into the
chunk's contextual header (embedded and shown with it) and precedes the chunk text when
propositions are written from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from propdex.models import Chunk

_SEPARATOR_ROW = re.compile(r"\s*\|\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*")
_CAPTION = re.compile(r"[*_#>\s]*Table\s+[A-Z]?\d+[a-z]?(?=\s*[:.|—–-]|\s*$|\s+[A-Z])")
_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*")
_NUMBER = re.compile(r"[^\w]*[\d.,·×%±+−-]+[^\w]*")
# A word hyphenated at a line break inside a cell: "sys-<br>tems", or "sys- tems" once the
# line break became a space ("pre- and post-training" is no such word).
_HYPHEN_BREAK = re.compile(r"([a-z]{2})-(?:<br>\s*| )(?!(?:and|or|to)\b)(?=[a-z]{2})")
_SUPERSCRIPT = re.compile(r"<sup>(.*?)</sup>", re.S)
_TAG = re.compile(r"<[^>]{1,20}>")
_SPACE = re.compile(r"\s+")
_NUMERIC_CITATION = re.compile(r"\s?\[\d+(?:\s*[,–-]\s*\d+)*\]")
# A paragraph this short between a caption and its table is the caption's wrapped tail.
CAPTION_TAIL_CHARS = 80
# Rows right after the separator that continue the header (a second header line, a group
# label over the columns) are at most this many.
MAX_HEADER_CONTINUATION = 3


@dataclass(frozen=True)
class Table:
    """Spans of one Markdown table in a text (end offsets exclusive)."""

    start: int  # the first header row
    head_end: int  # end of the last header row (the separator and any header continuation)
    end: int  # end of the last row
    rows: tuple[tuple[int, int], ...]  # the body rows
    caption: tuple[int, int] | None = None
    # A table continued from the page before (its header row repeated, no caption of its
    # own, nothing but the page break after the table it continues): that table's caption.
    continues: tuple[int, int] | None = None

    @property
    def block(self) -> tuple[int, int]:
        """The table with its caption."""
        if self.caption is None:
            return self.start, self.end
        return min(self.start, self.caption[0]), max(self.end, self.caption[1])


@dataclass(frozen=True)
class TablePiece:
    start: int
    end: int
    head: str  # caption and header rows the piece's text lacks ("" when it has both)


def split_cells(row: str) -> list[str]:
    """The cells of a pipe-table row, outer pipes removed, each stripped."""
    inner = row.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [cell.strip() for cell in inner.split("|")]


def plain_cell(cell: str) -> str:
    """A cell's text without Markdown emphasis, tags and line breaks."""
    cell = _HYPHEN_BREAK.sub(r"\1", cell)
    cell = _SUPERSCRIPT.sub(lambda m: "^" + m.group(1), cell.replace("<br>", " "))
    cell = _TAG.sub(" ", cell).replace("*", "").replace("_", "")
    cell = _NUMERIC_CITATION.sub("", cell)
    return _SPACE.sub(" ", cell).strip()


def _lines(text: str) -> list[tuple[int, int]]:
    """Each line's span without its surrounding whitespace."""
    spans, start = [], 0
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip())
        spans.append((start + indent, start + max(indent, len(line.rstrip()))))
        start += len(line) + 1
    return spans


def _is_header_continuation(row: str) -> bool:
    """A row continuing a multi-row header: no numeric cell, and either its first cell or
    all its other cells empty ("||EN-DE|EN-FR|", "|Model|||")."""
    cells = split_cells(row)
    if any(_NUMBER.fullmatch(c) for c in cells if c):
        return False
    return not cells[0] or not any(cells[1:])


def _table_at(text: str, lines: list[tuple[int, int]], first: int) -> tuple[Table, int] | None:
    """The table whose header row is line ``first``, and the index of the line after it."""
    if first + 1 >= len(lines) or not _SEPARATOR_ROW.fullmatch(text[slice(*lines[first + 1])]):
        return None
    last = first + 1
    while last + 1 < len(lines) and text[slice(*lines[last + 1])].lstrip().startswith("|"):
        last += 1
    body = lines[first + 2 : last + 1]
    head_rows = 0
    while (head_rows < min(MAX_HEADER_CONTINUATION, len(body) - 1)
           and _is_header_continuation(text[slice(*body[head_rows])])):
        head_rows += 1
    head_end = body[head_rows - 1][1] if head_rows else lines[first + 1][1]
    table = Table(lines[first][0], head_end, lines[last][1], tuple(body[head_rows:]))
    return table, last + 1


def _paragraphs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Stripped paragraphs (separated by blank lines) of ``text[start:end]``."""
    spans, cursor = [], start
    for gap in [*_BLANK_LINES.finditer(text, start, end), None]:
        stop = gap.start() if gap else end
        piece = text[cursor:stop]
        if piece.strip():
            left = cursor + len(piece) - len(piece.lstrip())
            spans.append((left, left + len(piece.strip())))
        cursor = gap.end() if gap else end
    return spans


def _is_caption(text: str, span: tuple[int, int]) -> bool:
    return bool(_CAPTION.match(text, span[0], span[1]))


def _caption_before(text: str, paragraphs: list[tuple[int, int]]) -> tuple[int, int] | None:
    if paragraphs and _is_caption(text, paragraphs[-1]):
        return paragraphs[-1]
    if (len(paragraphs) >= 2 and paragraphs[-1][1] - paragraphs[-1][0] <= CAPTION_TAIL_CHARS
            and _is_caption(text, paragraphs[-2])):
        return paragraphs[-2][0], paragraphs[-1][1]
    return None


def find_tables(text: str) -> list[Table]:
    """Every Markdown pipe table of ``text`` with its caption, in order."""
    lines = _lines(text)
    found: list[Table] = []
    index = 0
    while index < len(lines):
        located = None
        if text[slice(*lines[index])].lstrip().startswith("|"):
            located = _table_at(text, lines, index)
        if located is None:
            index += 1
            continue
        table, index = located
        found.append(table)
    with_captions: list[Table] = []
    for i, table in enumerate(found):
        previous_end = with_captions[-1].block[1] if with_captions else 0
        caption = _caption_before(text, _paragraphs(text, previous_end, table.start))
        if caption is None:
            next_start = found[i + 1].start if i + 1 < len(found) else len(text)
            after = _paragraphs(text, table.end, next_start)
            # A caption right before the next table is that table's.
            if after and _is_caption(text, after[0]) and not (i + 1 < len(found) and len(after) == 1):
                caption = after[0]
        continues = None
        if caption is None and with_captions:
            continues = _continued_caption(text, with_captions[-1], table)
        with_captions.append(Table(table.start, table.head_end, table.end, table.rows, caption,
                                   continues))
    return with_captions


def _continued_caption(text: str, previous: Table, table: Table) -> tuple[int, int] | None:
    """The caption of ``previous`` when ``table`` continues it: right after it (blank lines
    between, as a page break leaves) under the same header rows."""
    if text[previous.end:table.start].strip():
        return None
    if text[previous.start:previous.head_end] != text[table.start:table.head_end]:
        return None
    return previous.caption or previous.continues


def _units(table: Table) -> list[tuple[int, int]]:
    """The spans a table block is cut between: the caption, the header with the first row,
    each further row."""
    rows = list(table.rows)
    units = [(table.start, rows.pop(0)[1] if rows else table.head_end), *rows]
    if table.caption is not None:
        if table.caption[0] < table.start:
            units.insert(0, table.caption)
        else:
            units.append(table.caption)
    return units


def table_pieces(text: str, table: Table, limit: int) -> list[TablePiece]:
    """``table``'s block whole when it fits in ``limit`` characters, else cut between rows
    into pieces of at most ``limit`` (a longer single row or caption stays whole)."""
    spans: list[tuple[int, int]] = []
    for start, end in _units(table):
        if spans and end - spans[-1][0] <= limit:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return [TablePiece(start, end, _missing_head(text, table, start, end)) for start, end in spans]


def _missing_head(text: str, table: Table, start: int, end: int) -> str:
    parts = []
    if table.caption is not None and not start <= table.caption[0] < end:
        parts.append(text[slice(*table.caption)])
    elif table.continues is not None:
        parts.append(text[slice(*table.continues)])
    has_rows = any(start <= row_start < end for row_start, _ in table.rows)
    if has_rows and not start <= table.start < end:
        parts.append(text[table.start : table.head_end])
    return "\n\n".join(parts)


def _normalised(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def _mentions(statement: str, cell: str) -> bool:
    return bool(cell) and re.search(rf"(?<!\w){re.escape(cell)}(?!\w)", statement) is not None


# A row is the one a statement states when its score (2 for its first cell, 1 for each
# other cell found in the statement) reaches this and no other row's does as well.
MIN_ROW_SCORE = 3


def row_span(text: str, statement: str) -> tuple[int, int] | None:
    """The span in ``text`` of the one table body row that ``statement`` states; None when
    no row, or more than one equally, fits."""
    said = _normalised(statement)
    scored: list[tuple[int, tuple[int, int]]] = []
    for table in find_tables(text):
        for span in table.rows:
            cells = [_normalised(plain_cell(c)) for c in split_cells(text[slice(*span)])]
            score = 2 * _mentions(said, cells[0]) + sum(_mentions(said, c) for c in cells[1:])
            scored.append((score, span))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    if not scored or scored[0][0] < MIN_ROW_SCORE or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def chunk_row_span(chunk: Chunk, statement: str) -> tuple[int, int] | None:
    """``row_span`` of ``statement`` in the chunk's prompt text, as offsets of the document
    text (a row of the table head is not the chunk's)."""
    span = row_span(chunk.prompt_text, statement)
    lead = len(chunk.prompt_text) - len(chunk.text)
    if span is None or span[0] < lead:
        return None
    return chunk.char_start + span[0] - lead, chunk.char_start + span[1] - lead
