"""PDF pages read through PyMuPDF's layout engine (pymupdf4llm, bundled with PyMuPDF 2).

The engine finds each page's layout boxes (title, section header, text, list item, table,
picture, formula, footnote, caption, page header and footer) in reading order, tables with
their cell grid. Each box becomes one paragraph of Markdown: ``#`` headings (levels from
the headings' font sizes across the document), ``- `` list items, ``> `` footnotes and pipe
tables with one row per line and empty cells kept. Running headers and footers are left
out by propdex's own detector (``furniture``), given the engine's lines: it removes only
lines repeated across pages, where the engine's page-header and page-footer classes also
took a page's footnote and the date and e-mail of a title page (bench/RESULTS.md). Text
comes from the engine's plain-text renderers (``*_to_text`` and the tables'
``extract`` cells), not its Markdown ones: those wrap every styled span in ``_``/``**``
and superscripts in ``<sup>``, which would land in the index as noise
(``2_._3_·_10<sup>19</sup>`` for 2.3 · 10^19). The plain text has no superscript mark
either ("2.3 · 1019"): text boxes, footnotes and table cells holding a superscript are
read from their spans (``propdex.extract.spans``), which write an exponent with a caret.

Every paragraph records the rectangle it was read from, every table row its row's
rectangle, so that stored text maps back to page regions.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import re
from dataclasses import dataclass, field

import pymupdf

from propdex.extract.layout import Block
from propdex.extract.normalise import normalise_pdf_text, tidy_whitespace
from propdex.extract.spans import (
    cell_text,
    footnotes_text,
    lines_text,
    page_spans,
    split_merged_spans,
    superscript_cell_text,
)
from propdex.extract.table_cells import spanned_phrases
from propdex.extract.table_rows import (
    Rule,
    continuation_rows,
    horizontal_rules,
    merge_rows,
    spanning_cells,
    union,
)
from propdex.extract.table_wraps import wrapped_rows
from propdex.models import PageBox, SectionHint, TextRegion

PARAGRAPH_SEPARATOR = "\n\n"
OCR_LANGUAGE = "eng"
_HEADINGS = ("title", "section-header")
_FURNITURE = ("page-header", "page-footer")
# What is left of a page header box once its running header is out is a heading when set
# this much larger than the page's body text (headings are; a date or a note is not).
HEADING_SIZE_RATIO = 1.2
_MAX_HEADING_LEVEL = 6
_NUMBERED_ITEM = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "[", "(")
_SENTENCE_ENDS = (".", "!", "?", ":", ";")
_CLOSING_MARKS = "\"'”’)]*"
# Boxes of running text (a fast-mode fallback page is one such box).
_RUNNING_TEXT = ("text", "list-item", "")
# Three letters in a row: OCR output without one is no legible text.
_WORD = re.compile(r"[^\W\d_]{3}")
# A caption the engine classes as text.
_CAPTION = re.compile(r"(?:Figure|Fig\.|Table|Exhibit|Chart)\s*\d+[a-z]?\s*[:.|]")


@dataclass
class Piece:
    """One layout box's text on a page. ``parts`` are (start, end, rectangle) within
    ``text``; a heading's text gets its ``#`` prefix once every heading size is known."""

    text: str
    parts: list[tuple[int, int, tuple[float, float, float, float]]]
    heading_size: int | None = None
    # The box's lines as printed, with their rectangles and font sizes (for the furniture
    # detector)
    lines: list[tuple[str, tuple[float, float, float, float], float]] = field(default_factory=list)
    kind: str = ""  # the engine's box class ("text", "caption", "table"...)


@dataclass
class TablePage:
    """What mending a page's tables reads besides the engine's grid: the page's words
    (``get_text("words")``) and horizontal rules."""

    words: list[tuple] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)


@dataclass
class PagePieces:
    pieces: list[Piece] = field(default_factory=list)
    height: float = 0.0
    top: float = 0.0
    furniture_lines: int = 0  # lines of running headers and footers left out
    ocr: bool = False  # some of its text came from OCR


@dataclass
class LayoutPages:
    """Page texts and, relative to each page's start, its regions and sections."""

    texts: list[str]
    # (start, end, rectangle, block): the block numbers boxes across the document
    regions: list[list[tuple[int, int, tuple[float, float, float, float], int]]]
    sections: list[list[tuple[int, str, int]]]  # (offset, title, level)
    furniture_removed: int
    # Per page: whether it starts by going on with the paragraph the page before ends with
    # (its text then joins the page before's with a space, not a blank line).
    continued: list[bool] = field(default_factory=list)


@functools.cache
def _engine():
    # Imported on first use, as the fast reader needs none of it (its ONNX models load on
    # the first page read: about two seconds).
    import pymupdf4llm.helpers.document_layout as document_layout
    from pymupdf4llm.helpers import utils

    # The engine reports its OCR decisions through PyMuPDF's messages, which go to stdout
    # by default, where `propdex ingest --json` prints its summary: they go to the logging
    # module instead, at debug level.
    pymupdf.set_messages(pylogging=True, pylogging_name="pymupdf", pylogging_level=logging.DEBUG)
    return document_layout, utils


def read_page(doc: pymupdf.Document, index: int, ocr: bool) -> PagePieces:
    """The page's boxes as pieces of text. With ``ocr`` the engine decides whether the page
    (or an image on it) needs OCR and runs Tesseract on what has no legible text. Raises
    whatever the engine raises."""
    document_layout, utils = _engine()
    options: dict = {"use_ocr": False}
    if ocr:
        # Passed in rather than chosen by the engine, which would announce its choice on
        # every call; imported only here, as it looks for Tesseract on import.
        from pymupdf4llm.ocr import tesseract_api

        options = {"use_ocr": True, "ocr_function": tesseract_api.exec_ocr,
                   "ocr_language": OCR_LANGUAGE}
    # The engine reads the page as shown (it takes out its /Rotate, rewriting the page);
    # boxes are stored in the page's unrotated space, where MuPDF gives its text.
    to_unrotated = doc.load_page(index).derotation_matrix
    with contextlib.redirect_stdout(io.StringIO()):  # it print()s a line before its messages
        parsed = document_layout.parse_document(doc, pages=[index], force_text=True, **options)
    page = parsed.pages[0]
    rect = doc.load_page(index).rect
    result = PagePieces(height=rect.height, top=rect.y0)
    if ocr:
        _drop_illegible_ocr(page.boxes)
    result.ocr = ocr and any(utils.is_ocr_text(span) for box in page.boxes
                             for line in box.textlines or [] for span in line["spans"])
    levels = document_layout.create_list_item_levels(page.boxes)
    raw_spans = page_spans(doc.load_page(index))
    # Words and rules are needed only to mend table cells and rows (table_cells, table_rows).
    tables = TablePage()
    if any(box.boxclass == "table" for box in page.boxes):
        tables = TablePage(doc.load_page(index).get_text("words"),
                           horizontal_rules(doc.load_page(index)))
    for number, box in enumerate(page.boxes):
        box_rect = (float(box.x0), float(box.y0), float(box.x1), float(box.y1))
        # Lines before rendering: the renderers consume the spans of list items.
        lines = [("".join(s["text"] for s in line["spans"]), tuple(map(float, line["bbox"])),
                  max(float(s["size"]) for s in line["spans"]))
                 for line in box.textlines or [] if line["spans"]]
        piece = _box_piece(box, box_rect, levels.get(number, 1), raw_spans, tables)
        if piece is not None and piece.text:
            piece.lines = lines
            piece.parts = [(start, end, _unrotated(_within(part, rect), to_unrotated))
                           for start, end, part in piece.parts]
            result.pieces.append(piece)
    return result


def _within(box: tuple[float, float, float, float], page: pymupdf.Rect,
            ) -> tuple[float, float, float, float]:
    """``box`` cut to the page: the engine's boxes follow the text, which may run past the
    page's crop box by a point or a whole word (hidden, and not extracted)."""
    x0, y0, x1, y1 = box
    return (min(max(x0, page.x0), page.x1), min(max(y0, page.y0), page.y1),
            max(min(x1, page.x1), page.x0), max(min(y1, page.y1), page.y0))


def _unrotated(box: tuple[float, float, float, float], matrix: pymupdf.Matrix,
               ) -> tuple[float, float, float, float]:
    rect = (pymupdf.Rect(box) * matrix).normalize()
    return (rect.x0, rect.y0, rect.x1, rect.y1)


def _drop_illegible_ocr(boxes) -> None:
    """On a page with a text layer of its own (a cover with a title in type over a photo),
    keep of what OCR read only lines with a word in them: Tesseract reads a photo as
    letters and marks ("a", "es", "a a | — re"), while a logo's words ("McKinsey &
    Company") are text the layer lacks. A page that is all scan keeps all its OCR text."""
    _, utils = _engine()
    spans = [s for box in boxes for line in box.textlines or [] for s in line["spans"]]
    if not any(s["text"].strip() and not utils.is_ocr_text(s) for s in spans):
        return
    for box in boxes:
        if box.textlines:
            box.textlines = [line for line in box.textlines if not _illegible_ocr(line, utils)]


def _illegible_ocr(line: dict, utils) -> bool:
    spans = line["spans"]
    return (bool(spans) and all(utils.is_ocr_text(s) for s in spans)
            and not _WORD.search(" ".join(s["text"] for s in spans)))


def furniture_blocks(page: PagePieces) -> tuple[list[Block], list[tuple[int, int]]]:
    """Every line of the page's pieces as a one-line block with its own box, as the
    furniture detector reads blocks, and the (piece index, line index) each one is. Tables
    offer none: a table header repeated atop each page of a long table is content."""
    blocks, owners = [], []
    for piece_index, piece in enumerate(page.pieces):
        for line_index, (text, rect, _) in enumerate(piece.lines):
            blocks.append(Block(*rect, text + "\n"))
            owners.append((piece_index, line_index))
    return blocks, owners


def drop_furniture(page: PagePieces, removed: set[tuple[int, int]]) -> None:
    """Leave out the (piece index, line index) lines the furniture detector found. What is
    left of a page header or footer box set larger than the page's body text is a heading:
    the engine takes a heading printed right under a running header into the header's box."""
    body = _body_size(page)
    kept_pieces = []
    for index, piece in enumerate(page.pieces):
        gone = {line for piece_index, line in removed if piece_index == index}
        if not gone:
            kept_pieces.append(piece)
            continue
        page.furniture_lines += len(gone)
        kept = [line for number, line in enumerate(piece.lines) if number not in gone]
        size = min((line_size for _, _, line_size in kept), default=0.0)
        if (piece.kind in _FURNITURE and piece.heading_size is None and body
                and size >= HEADING_SIZE_RATIO * body):
            piece.heading_size, piece.kind = round(size), "section-header"
        joined = " ".join(text for text, _, _ in kept)
        text = _one_line(joined) if piece.heading_size is not None else normalise_pdf_text(joined)
        if text:
            box = union([rect for _, rect, _ in kept])
            piece.text, piece.lines = text, kept
            piece.parts = [(0, len(text), _intersection(box, piece.parts[0][2]))]
            kept_pieces.append(piece)
    page.pieces = kept_pieces


def _body_size(page: PagePieces) -> float | None:
    """The font size most of the page's running text is set in (by characters)."""
    sizes: dict[float, int] = {}
    for piece in page.pieces:
        if piece.kind == "text":
            for text, _, size in piece.lines:
                sizes[round(size, 1)] = sizes.get(round(size, 1), 0) + len(text)
    return max(sizes, key=sizes.__getitem__) if sizes else None


def _intersection(box, bounds):
    """``box`` cut to ``bounds`` (both (x0, y0, x1, y1)); ``bounds`` where they do not meet."""
    x0, y0 = max(box[0], bounds[0]), max(box[1], bounds[1])
    x1, y1 = min(box[2], bounds[2]), min(box[3], bounds[3])
    return (x0, y0, x1, y1) if x0 < x1 and y0 < y1 else bounds


def _box_piece(box, rect, list_level: int, raw_spans: dict[int, list[dict]],
               tables: TablePage) -> Piece | None:
    document_layout, _ = _engine()
    kind = box.boxclass
    if kind == "table":
        piece = _table_piece(box.table or {}, rect, raw_spans, tables)
        if piece is not None:
            piece.kind = kind
        return piece
    lines = box.textlines or []
    if not lines:
        return None
    if kind not in ("picture", "list-item"):
        split_merged_spans(lines, raw_spans)
    if kind in _HEADINGS:
        title = _one_line(lines_text(lines))
        return Piece(title, [(0, len(title), rect)], heading_size=box.max_fontsize or 0, kind=kind)
    if kind == "picture":
        # Labels and values drawn inside a chart: one line each, as printed.
        raw = "\n".join(" ".join(s["text"] for s in line["spans"]) for line in lines)
    elif kind == "formula":
        # One line each, spaced as printed: "softmax(QK^T)" rather than "softmax( QK T )".
        raw = "\n".join(lines_text([line]) for line in lines)
    elif kind == "list-item":
        raw = _list_items(document_layout.list_item_to_text(lines, list_level))
    elif kind == "footnote" or document_layout.is_superscripted(lines[0]):
        raw = footnotes_text(lines)  # a footnote, or one the engine classed as text
    elif document_layout.is_monospaced(lines):
        raw = document_layout.code_block_to_text(lines)
    else:
        raw = lines_text(lines)
    text = normalise_pdf_text(raw)
    return Piece(text, [(0, len(text), rect)], kind=kind)


def _one_line(text: str) -> str:
    return " ".join(tidy_whitespace(text).split())


def _list_items(text: str) -> str:
    """Markdown list items: the engine's plain renderer drops private-use bullet glyphs
    but keeps others and writes no marker; each item gets "- " unless numbered."""
    _, utils = _engine()
    items = []
    for item in text.split(PARAGRAPH_SEPARATOR):
        body = item.strip()
        if not body:
            continue
        indent = item[: len(item) - len(item.lstrip(" "))]
        if utils.startswith_bullet(body):
            body = body[1:].strip()
        elif body.startswith(_NUMBERED_ITEM):
            items.append(indent + body)
            continue
        items.append(f"{indent}- {body}")
    return "\n".join(items)


def _cell(text: str | None) -> str:
    return _one_line(text or "").replace("|", "\\|")


def _cells(row: list[str | None], rects, raw: dict[int, list[dict]], words: list[tuple],
           header: bool) -> list[str]:
    """A row's cells; one holding a superscript is read from its spans (the plain extract
    runs an exponent into its base); a phrase the grid cut is joined back."""
    rects = rects or []
    texts = [
        (superscript_cell_text(rects[n], raw) if n < len(rects) and rects[n] and text
         else None) or text
        for n, text in enumerate(row)
    ]
    for phrase in spanned_phrases(row, rects, words):
        # Read from the rectangle of the whole phrase: a span of the page lies in one cell
        # or the next by its centre, so the cells' own readings could repeat or drop a piece
        # ("abo" | "about 2.3 · 10^19").
        text = superscript_cell_text(union(rects[phrase.first:phrase.last + 1]), raw)
        for n in range(phrase.first, phrase.last + 1):
            texts[n] = (text or phrase.text) if header or n == phrase.first else ""
    return [_cell(text) for text in texts]


def _table_piece(table: dict, rect, raw: dict[int, list[dict]], page: TablePage,
                 ) -> Piece | None:
    """A pipe table, one row per line, the first row as its header; each row records the
    rectangle its cells span. Rows the grid cut in two are joined (``propdex.extract.table_rows``,
    and ``table_wraps`` for a borderless table cut after each line of a wrapped cell), and a
    cell printed across rows is given to each of them."""
    grid = table.get("extract") or []
    boxes = table.get("cells") or []
    rows = [(list(grid[n]), list(boxes[n]) if n < len(boxes) and boxes[n] else [None] * len(grid[n]))
            for n in range(len(grid)) if any(_cell(c) for c in grid[n])]
    if not rows:
        return None
    texts, rects = [r for r, _ in rows], [b for _, b in rows]
    continued = {*continuation_rows(texts, rects, page.words, page.rules),
                 *wrapped_rows(texts, rects, page.words, page.rules)}
    texts, rects = merge_rows(texts, rects, sorted(continued))
    spread = _spread_spanning_cells(texts, rects, raw, page)
    kept = [
        (_cells(texts[index], rects[index], raw, page.words, header=index == 0), rects[index])
        for index in range(len(texts))
        if any(_cell(text) for column, text in enumerate(texts[index])
               if (index, column) not in spread)
    ]
    width = max(len(row) for row, _ in kept)
    lines: list[str] = []
    parts = []
    offset = 0
    for index, (row, row_cells) in enumerate(kept):
        line = "|" + "|".join(row + [""] * (width - len(row))) + "|"
        parts.append((offset, offset + len(line), union(row_cells) or rect))
        lines.append(line)
        offset += len(line) + 1
        if index == 0:
            separator = "|" + "|".join(["---"] * width) + "|"
            lines.append(separator)
            offset += len(separator) + 1
    return Piece("\n".join(lines), parts)


def _spread_spanning_cells(texts: list[list[str | None]], rects: list[list],
                           raw: dict[int, list[dict]], page: TablePage) -> set[tuple[int, int]]:
    """Give each cell printed across rows below the header, read whole from its rectangle,
    to every row it spans; the (row, column) slots filled so."""
    filled = set()
    for span in spanning_cells(rects, page.words, page.rules, body=1):
        rows = range(span.first, span.last + 1)
        box = union([rects[row][span.column] for row in rows])
        pieces = " ".join((texts[row][span.column] or "").strip() for row in rows)
        text = cell_text(box, raw) or " ".join(pieces.split())
        for row in rows:
            texts[row][span.column], rects[row][span.column] = text, box
            filled.add((row, span.column))
    return filled


def heading_levels(sizes: set[int]) -> dict[int, int]:
    """Heading level per font size, as the engine assigns them: the six largest sizes are
    levels 1-6, anything smaller is level 6."""
    ranked = sorted(sizes, reverse=True)
    return {size: min(ranked.index(size) + 1, _MAX_HEADING_LEVEL) for size in ranked}


def _ends_mid_sentence(piece: Piece) -> bool:
    return (piece.kind == "text" and not _CAPTION.match(piece.text)
            and not piece.text.rstrip(_CLOSING_MARKS).endswith(_SENTENCE_ENDS))


def _continues(piece: Piece) -> bool:
    return piece.kind == "text" and piece.text[:1].isalpha() and not _CAPTION.match(piece.text)


def _out_of_flow(piece: Piece) -> bool:
    """A figure with its labels (which the engine may class as headings), a caption, a
    table, a formula or a footnote: what a paragraph flows around."""
    return piece.kind not in _RUNNING_TEXT or bool(_CAPTION.match(piece.text))


def rejoin_paragraphs(previous: PagePieces | None, page: PagePieces) -> None:
    """Put back together a paragraph the engine cut around a figure, a table or a footnote.

    On one page, a paragraph that ends in mid-sentence and the next paragraph of running
    text, when it goes on with it (``_goes_on``), are one paragraph; what stood between them
    follows it. At the top of a page, a paragraph that goes on with the sentence the page
    before ends with, after only figures, captions, tables and footnotes, moves to the top
    ("... computed as a weighted sum" / Figure 2 and its caption / "of the values, where
    ..."), and ``continue_across_pages`` joins the two pages' texts. Otherwise the figure
    cuts the sentence for the chunker, the sentence splitter and the offline propositions
    (which drop a sentence that starts in lower case)."""
    pieces = page.pieces
    running = [n for n, p in enumerate(previous.pieces) if p.kind in _RUNNING_TEXT] if previous else []
    if running:
        first = next((n for n, p in enumerate(pieces) if not _out_of_flow(p)), None)
        between = previous.pieces[running[-1] + 1:] + pieces[:first]
        if first and _goes_on(previous.pieces[running[-1]], pieces[first], between):
            pieces.insert(0, pieces.pop(first))
    index = 0
    while index < len(pieces):
        piece = pieces[index]
        if _ends_mid_sentence(piece):
            after = next((n for n in range(index + 1, len(pieces))
                          if not _out_of_flow(pieces[n])), None)
            if after is not None and _goes_on(piece, pieces[after], pieces[index + 1:after]):
                rest = pieces.pop(after)
                shift = len(piece.text) + 1
                piece.text = f"{piece.text} {rest.text}"
                piece.parts += [(start + shift, end + shift, rect) for start, end, rect in rest.parts]
                piece.lines += rest.lines
                continue  # the joined paragraph may go on further down the page
        index += 1


# The last word of a paragraph a capitalised paragraph may go on with: letters only, maybe
# a comma ("... running back DeAngelo" / "Williams and ..."); not an e-mail address, a
# footnote mark or a number.
_CUT_WORD = re.compile(r"(?:^|\s)[^\W\d_]*[a-z],?$")


def _goes_on(last: Piece, first: Piece, between: list[Piece]) -> bool:
    """Whether ``first`` goes on with ``last``, a paragraph the layout cut at a figure, a
    column or a page turn, with ``between`` (figures, captions, tables, footnotes, headings)
    printed between them. A lower-case start goes on any paragraph that ends in
    mid-sentence; a capital only one of two lines or more that ends in a plain word or a
    comma, with no heading between: a label, an author list or a title is no cut sentence."""
    if not (_ends_mid_sentence(last) and _continues(first)):
        return False
    return first.text[:1].islower() or (
        len(last.lines) >= 2 and bool(_CUT_WORD.search(last.text))
        and not any(p.kind in _HEADINGS for p in between))


def continue_across_pages(previous: PagePieces, page: PagePieces) -> bool:
    """Whether ``page`` starts by going on with the paragraph ``previous`` ends with.

    Where it does, the footnotes, captions and figures printed below that paragraph move
    above it (and above the headings right before it: a footnote belongs to the text before
    a new section, not to the top of it), so the paragraph ends its page and reads on into
    the next one: a sentence cut by the page turn is one sentence for the chunker, the
    sentence splitter and the propositions, as it is for a reader turning the page."""
    pieces = previous.pieces
    running = [n for n, p in enumerate(pieces) if p.kind in _RUNNING_TEXT and not _out_of_flow(p)]
    if not running or not page.pieces:
        return False
    last = running[-1]
    if not _goes_on(pieces[last], page.pieces[0], pieces[last + 1:]):
        return False
    start = last
    while start and pieces[start - 1].kind in _HEADINGS:
        start -= 1
    moving = pieces[start:last + 1]
    del pieces[start:last + 1]
    pieces.extend(moving)
    return True


def assemble(pages: list[PagePieces]) -> LayoutPages:
    """Page texts with paragraphs joined by blank lines, headings written with their ``#``
    level, and each page's regions and sections relative to the page start."""
    for number, page in enumerate(pages):
        rejoin_paragraphs(pages[number - 1] if number else None, page)
    continued = [bool(number) and continue_across_pages(pages[number - 1], page)
                 for number, page in enumerate(pages)]
    levels = heading_levels({p.heading_size for page in pages for p in page.pieces
                             if p.heading_size is not None})
    texts, regions, sections = [], [], []
    block = 0
    for page in pages:
        chunks: list[str] = []
        page_regions = []
        page_sections = []
        offset = 0
        for piece in page.pieces:
            text, shift = piece.text, 0
            if piece.heading_size is not None:
                level = levels[piece.heading_size]
                page_sections.append((offset, piece.text, level))
                shift = level + 1
                text = "#" * level + " " + piece.text
            # A heading's region takes in its "#" prefix.
            page_regions += [
                (offset + start + (shift if start else 0), offset + end + shift, rect, block)
                for start, end, rect in piece.parts
            ]
            block += 1
            chunks.append(text)
            offset += len(text) + len(PARAGRAPH_SEPARATOR)
        texts.append(PARAGRAPH_SEPARATOR.join(chunks))
        regions.append(page_regions)
        sections.append(page_sections)
    furniture = sum(page.furniture_lines for page in pages)
    return LayoutPages(texts, regions, sections, furniture, continued)


def place(layout: LayoutPages, page_starts: list[int]) -> tuple[list[TextRegion], list[SectionHint]]:
    """Regions and sections at their offsets in the joined document text."""
    regions: list[TextRegion] = []
    sections: list[SectionHint] = []
    for number, (start, page_regions, page_sections) in enumerate(
        zip(page_starts, layout.regions, layout.sections, strict=True), start=1
    ):
        for begin, end, (x0, y0, x1, y1), block in page_regions:
            regions.append(TextRegion(start + begin, start + end,
                                      PageBox(number, x0, y0, x1, y1), block))
        sections += [SectionHint(title, level, start + offset) for offset, title, level in page_sections]
    return regions, sections
