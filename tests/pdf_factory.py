"""Write small PDFs with PyMuPDF for tests: text pages, outlines, metadata, encryption,
blank pages, non-Latin scripts, running headers and footers, two-column pages.

Text is laid out with ``insert_textbox`` so long paragraphs wrap; an explicit "\\n" in a page
string starts a new line, which is how a test places a hyphen at a line end.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pymupdf

PAGE_RECT = pymupdf.paper_rect("a4")
MARGIN = 56
BODY_SIZE = 11
FURNITURE_SIZE = 8
# Baselines of running headers and footers: inside the outer 5% of the page, as printed.
HEADER_BASELINE = 36
FOOTER_BASELINE = PAGE_RECT.height - 30


def text_area() -> pymupdf.Rect:
    return PAGE_RECT + (MARGIN, MARGIN, -MARGIN, -MARGIN)


def unicode_font(script: str = "latin") -> pymupdf.Font:
    """A font MuPDF has built in: Noto Serif (Latin incl. ligature glyphs), Noto Naskh Arabic
    or Droid Sans Fallback (CJK). None needs a file on disk."""
    if script == "arabic":
        return pymupdf.Font(script=pymupdf.UCDN_SCRIPT_ARABIC)
    if script == "cjk":
        return pymupdf.Font("cjk")
    return pymupdf.Font(language="en")


def _write_text(
    page: pymupdf.Page, rect: pymupdf.Rect, text: str, fontname: str, fontsize: float
) -> None:
    overflow = page.insert_textbox(rect, text, fontname=fontname, fontsize=fontsize)
    if overflow < 0:
        raise ValueError(f"page text does not fit on one page ({-overflow:.0f} pt over)")


def build_pdf(
    pages: Sequence[str],
    *,
    title: str | None = None,
    toc: list[list] | None = None,
    font: pymupdf.Font | None = None,
    fontsize: float = BODY_SIZE,
    heading: str | None = None,
    heading_size: float = 24,
    header: str | None = None,
    footer: str | None = None,
) -> pymupdf.Document:
    """An open in-memory document; ``heading`` is set large at the top of page 1.

    With ``font`` the text is written in that font (embedded); else in Helvetica. An empty
    page string leaves the page blank. ``header`` and ``footer`` are printed small in the
    top and bottom margin of every page after the body (as many producers write them);
    ``{page}`` and ``{pages}`` in them become the page number and count."""
    doc = pymupdf.open()
    fontname = "helv"
    for number, text in enumerate(pages, start=1):
        page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
        if font is not None:
            fontname = "F0"
            page.insert_font(fontname=fontname, fontbuffer=font.buffer)
        area = text_area()
        if number == 1 and heading:
            page.insert_text((MARGIN, MARGIN), heading, fontname=fontname, fontsize=heading_size)
            area.y0 += heading_size
        if text:
            _write_text(page, area, text, fontname, fontsize)
        for line, baseline in ((header, HEADER_BASELINE), (footer, FOOTER_BASELINE)):
            if line:
                page.insert_text((MARGIN, baseline), line.format(page=number, pages=len(pages)),
                                 fontname=fontname, fontsize=FURNITURE_SIZE)
    if title is not None:
        doc.set_metadata({"title": title})
    if toc:
        doc.set_toc(toc)
    return doc


def make_pdf(
    path: str | Path,
    pages: Sequence[str],
    *,
    title: str | None = None,
    toc: list[list] | None = None,
    password: str | None = None,
    font: pymupdf.Font | None = None,
    heading: str | None = None,
    header: str | None = None,
    footer: str | None = None,
) -> Path:
    """Write a PDF with one entry of ``pages`` per page; ``toc`` rows are [level, title, page];
    ``password`` encrypts it (AES-256, same user and owner password)."""
    path = Path(path)
    doc = build_pdf(pages, title=title, toc=toc, font=font, heading=heading, header=header,
                    footer=footer)
    options: dict = {}
    if password is not None:
        options = {
            "encryption": pymupdf.PDF_ENCRYPT_AES_256,
            "user_pw": password,
            "owner_pw": password,
        }
    doc.save(path, garbage=1, **options)
    doc.close()
    return path


def make_blank_pdf(path: str | Path, page_count: int = 2) -> Path:
    """Pages without any text, as a scan without a text layer looks to a text extractor."""
    return make_pdf(path, [""] * page_count)


def make_rtl_pdf(path: str | Path, lines: Sequence[str], font: pymupdf.Font) -> Path:
    """Right-to-left lines (Arabic, Hebrew) written with TextWriter, which stores the glyphs
    so that extraction returns the logical order."""
    path = Path(path)
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    writer = pymupdf.TextWriter(page.rect)
    for index, line in enumerate(lines):
        position = (MARGIN, MARGIN + 20 * (index + 1))
        writer.append(position, line, font=font, fontsize=14, right_to_left=True)
    writer.write_text(page)
    doc.save(path)
    doc.close()
    return path


def pdf_bytes(pages: Sequence[str], **kwargs) -> bytes:
    """The bytes of a PDF built like make_pdf (for truncation and corruption tests)."""
    doc = build_pdf(pages, **kwargs)
    data = doc.tobytes(garbage=1)
    doc.close()
    return data


def make_two_column_pdf(
    path: str | Path,
    left: Sequence[str],
    right: Sequence[str],
    *,
    order: str = "lines",
    title: str | None = None,
    closing: str | None = None,
) -> Path:
    """One page with two columns of lines, ``left`` and ``right``, written into the content
    stream in ``order``: "lines" alternates single lines across the columns (producers that
    write a page row by row), "paragraphs" alternates paragraphs of three lines, "columns"
    writes the left column, then the right one. ``title`` runs across the page above the
    columns, ``closing`` below them."""
    path = Path(path)
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    gutter_x = PAGE_RECT.width / 2 + 8
    top = MARGIN + 40
    pitch = BODY_SIZE * 1.3
    if title:
        page.insert_text((MARGIN, MARGIN + 10), title, fontsize=18)
    placed = [((MARGIN, top + i * pitch), line) for i, line in enumerate(left)]
    placed_right = [((gutter_x, top + i * pitch), line) for i, line in enumerate(right)]
    if order == "lines":
        sequence = [p for pair in zip(placed, placed_right, strict=False) for p in pair]
    elif order == "paragraphs":
        sequence = []
        for start in range(0, max(len(placed), len(placed_right)), 3):
            sequence += placed[start:start + 3] + placed_right[start:start + 3]
    elif order == "columns":
        sequence = placed + placed_right
    else:
        raise ValueError(f"unknown order {order!r}")
    for position, line in sequence:
        page.insert_text(position, line, fontsize=BODY_SIZE)
    if closing:
        below = top + max(len(left), len(right)) * pitch + 2 * pitch
        page.insert_text((MARGIN, below), closing, fontsize=BODY_SIZE)
    doc.save(path)
    doc.close()
    return path


MINERALS = [
    ["Mineral", "Hardness", "Density"],
    ["Talc", "1", "2.7"],
    ["Gypsum", "2", "2.3"],
    ["Calcite", "3", ""],
    ["Quartz", "7", "2.65"],
]
TABLE_TOP = 200
TABLE_ROW_HEIGHT = 22
TABLE_COLUMNS = (MARGIN, MARGIN + 160, MARGIN + 280, MARGIN + 400)


def make_table_pdf(path: str | Path, rows: Sequence[Sequence[str]] = MINERALS, *,
                   ruled: bool = True) -> Path:
    """One page: a heading, a paragraph, a "Table 1" caption, a table of ``rows`` (ruled: a
    line around every cell; else borderless, only aligned columns) and a closing paragraph.
    Row r spans y from TABLE_TOP + r * TABLE_ROW_HEIGHT down one row height."""
    path = Path(path)
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    page.insert_text((MARGIN, 80), "Mohs scale", fontsize=18)
    _write_text(page, pymupdf.Rect(MARGIN, 100, PAGE_RECT.width - MARGIN, 160),
                "Minerals are ranked by scratch hardness. The table below lists four common "
                "minerals with their density in grams per cubic centimetre.", "helv", BODY_SIZE)
    page.insert_text((MARGIN, TABLE_TOP - 15), "Table 1: Hardness and density of minerals",
                     fontsize=10)
    bottom = TABLE_TOP + len(rows) * TABLE_ROW_HEIGHT
    for number, row in enumerate(rows):
        for x, cell in zip(TABLE_COLUMNS, row, strict=False):
            page.insert_text((x + 5, TABLE_TOP + number * TABLE_ROW_HEIGHT + 15), cell,
                             fontsize=BODY_SIZE)
    if ruled:
        for number in range(len(rows) + 1):
            y = TABLE_TOP + number * TABLE_ROW_HEIGHT
            page.draw_line((TABLE_COLUMNS[0], y), (TABLE_COLUMNS[-1], y))
        for x in TABLE_COLUMNS:
            page.draw_line((x, TABLE_TOP), (x, bottom))
    _write_text(page, pymupdf.Rect(MARGIN, bottom + 30, PAGE_RECT.width - MARGIN, bottom + 100),
                "Quartz is the hardest of the four and is common in granite and sandstone.",
                "helv", BODY_SIZE)
    doc.save(path)
    doc.close()
    return path


# A table with group headers over two columns each and a value centred over two columns: None
# marks a cell the one before it spans.
GROUPED = [
    ["Model", "BLEU on newstest2014", None, "Training Cost (FLOPs)", None],
    ["", "EN-DE", "EN-FR", "EN-DE", "EN-FR"],
    ["ByteNet", "23.75", "", "", ""],
    ["GNMT", "24.6", "39.92", "2.3e19", "1.4e20"],
    ["ConvS2S", "25.16", "40.46", "9.6e18", "1.5e20"],
    ["Transformer", "28.4", "41.8", "2.3e19 for both tests", None],
]
GROUPED_COLUMNS = (MARGIN, 200, 260, 320, 380, 440)


# A piece of printed text: (text, font name, font size, points its baseline is raised).
TextPiece = tuple[str, str, float, float]


def make_grouped_table_pdf(path: str | Path, spanning_value: Sequence[TextPiece] = ()) -> Path:
    """One page: a heading, a "Table 2" caption and GROUPED in 9 pt, ruled only above, below
    and under its two header rows (as papers set them). A spanning cell's text is centred
    over its columns and wider than one of them, so the engine's grid cuts it. With
    ``spanning_value``, the last row's value is printed as those pieces instead, one after
    the other, as a formula is set: a span per font, an exponent smaller and raised."""
    path = Path(path)
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    page.insert_text((MARGIN, 80), "Results", fontsize=18)
    page.insert_text((MARGIN, 120), "Table 2: Scores and costs of the translation models",
                     fontsize=10)
    top, pitch = 140, 16
    for number, row in enumerate(GROUPED):
        baseline = top + (number + 1) * pitch - 4
        for column, cell in enumerate(row):
            if not cell:
                continue
            pieces = [(cell, "helv", 9, 0)]
            if spanning_value and number == len(GROUPED) - 1 and row[column + 1:] == [None]:
                pieces = list(spanning_value)
            x = GROUPED_COLUMNS[column] + 2
            if column + 1 < len(row) and row[column + 1] is None:
                middle = (GROUPED_COLUMNS[column] + GROUPED_COLUMNS[column + 2]) / 2
                x = middle - sum(pymupdf.get_text_length(text, fontname=font, fontsize=size)
                                 for text, font, size, _ in pieces) / 2
            for text, font, size, rise in pieces:
                page.insert_text((x, baseline - rise), text, fontname=font, fontsize=size)
                x += pymupdf.get_text_length(text, fontname=font, fontsize=size)
    for y in (top, top + 2 * pitch, top + len(GROUPED) * pitch):
        page.draw_line((GROUPED_COLUMNS[0], y), (GROUPED_COLUMNS[-1], y))
    page.insert_text((MARGIN, top + len(GROUPED) * pitch + 30),
                     "The Transformer scores best on both tests.", fontsize=BODY_SIZE)
    doc.save(path)
    doc.close()
    return path


# Rows of a ruled table whose row label (None below it) is centred over two rows.
LABELLED = [
    ["Model", "EN-DE", "EN-FR", "Cost"],
    ["(A)", "24.6", "39.9", "2.3e19"],
    [None, "25.1", "40.4", "9.6e18"],
    ["Big", "28.4", "41.8", "1.1e20"],
]
LABELLED_COLUMNS = (MARGIN, 200, 290, 380, 470)


def _captioned_page(heading: str, caption: str, baseline: float) -> tuple[pymupdf.Document, pymupdf.Page]:
    """A new one-page document: ``heading`` in 18 pt, ``caption`` in 10 pt at ``baseline``."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    page.insert_text((MARGIN, 80), heading, fontsize=18)
    page.insert_text((MARGIN, baseline), caption, fontsize=10)
    return doc, page


def make_row_label_table_pdf(path: str | Path) -> Path:
    """One page: a heading, a "Table 1" caption and LABELLED in 10 pt, a line around each
    cell, the row label's cell over two rows (no line through it)."""
    path = Path(path)
    doc, page = _captioned_page("Results", "Table 1: Scores of the models", 120)
    top, pitch = 140, 20
    for number, row in enumerate(LABELLED):
        for column, cell in enumerate(row):
            if not cell:
                continue
            spans_two = number + 1 < len(LABELLED) and LABELLED[number + 1][column] is None
            baseline = top + (number + 1) * pitch - 6 + (pitch / 2 if spans_two else 0)
            page.insert_text((LABELLED_COLUMNS[column] + 5, baseline), cell, fontsize=10)
    for number in range(len(LABELLED) + 1):
        y = top + number * pitch
        for column, (x0, x1) in enumerate(itertools.pairwise(LABELLED_COLUMNS)):
            if not (0 < number < len(LABELLED) and LABELLED[number][column] is None):
                page.draw_line((x0, y), (x1, y))
    for x in LABELLED_COLUMNS:
        page.draw_line((x, top), (x, top + len(LABELLED) * pitch))
    page.insert_text((MARGIN, top + len(LABELLED) * pitch + 30), "The big model scores best.",
                     fontsize=BODY_SIZE)
    doc.save(path)
    doc.close()
    return path


def _ruled_rows(page: pymupdf.Page, top: float, rows: Sequence[Sequence[str]]) -> None:
    for number, row in enumerate(rows):
        for x, cell in zip(TABLE_COLUMNS, row, strict=False):
            page.insert_text((x + 5, top + number * TABLE_ROW_HEIGHT + 15), cell,
                             fontsize=BODY_SIZE)
    for number in range(len(rows) + 1):
        y = top + number * TABLE_ROW_HEIGHT
        page.draw_line((TABLE_COLUMNS[0], y), (TABLE_COLUMNS[-1], y))
    for x in TABLE_COLUMNS:
        page.draw_line((x, top), (x, top + len(rows) * TABLE_ROW_HEIGHT))


def make_continued_table_pdf(path: str | Path, header: Sequence[str],
                             pages: Sequence[Sequence[Sequence[str]]], caption: str) -> Path:
    """A ruled table over several pages, as long tables are printed: ``caption`` above it on
    the first page, its ``header`` row repeated atop each page, then that page's rows."""
    path = Path(path)
    doc = pymupdf.open()
    for number, rows in enumerate(pages):
        page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
        top = MARGIN
        if number == 0:
            page.insert_text((MARGIN, 80), "Elements", fontsize=18)
            page.insert_text((MARGIN, 115), caption, fontsize=10)
            top = 130
        _ruled_rows(page, top, [header, *rows])
    doc.save(path)
    doc.close()
    return path



# Table 3 of the Transformer paper in small: row groups whose label is centred over their
# rows, rules only between the groups (and after the label column).
VARIANTS_HEADER = ["", "h", "dk", "PPL", "BLEU"]
VARIANT_GROUPS = [
    ("base", [["8", "64", "4.92", "25.8"]]),
    ("(A)", [["1", "512", "5.29", "24.9"], ["4", "128", "5.00", "25.5"],
             ["16", "32", "4.91", "25.8"], ["32", "16", "5.01", "25.4"]]),
    ("(B)", [["", "16", "5.16", "25.1"], ["", "32", "5.01", "25.4"], ["", "8", "5.30", "24.8"]]),
    ("big", [["16", "", "4.33", "26.4"]]),
]
VARIANT_COLUMNS = (MARGIN, 110, 160, 220, 290, 360)


def make_row_group_table_pdf(path: str | Path) -> Path:
    """One page: a heading, a "Table 3" caption and VARIANT_GROUPS in 9 pt, one line per row,
    each group's label centred over its rows, a rule above and below each group and one
    between the label column and the rest."""
    path = Path(path)
    doc, page = _captioned_page("Variations", "Table 3: Variations on the base model", 115)
    pitch, top = 11, 130
    rules = [top]
    for x, cell in zip(VARIANT_COLUMNS[1:], VARIANTS_HEADER[1:], strict=False):
        page.insert_text((x + 4, top + 10), cell, fontsize=9)
    rules.append(top + 14)
    for label, rows in VARIANT_GROUPS:
        start = rules[-1] + 2
        for number, row in enumerate(rows):
            for x, cell in zip(VARIANT_COLUMNS[1:], row, strict=False):
                page.insert_text((x + 4, start + (number + 1) * pitch - 2), cell, fontsize=9)
        middle = start + len(rows) * pitch / 2
        page.insert_text((VARIANT_COLUMNS[0] + 4, middle + 3), label, fontsize=9)
        rules.append(start + len(rows) * pitch + 2)
    for y in rules:
        page.draw_line((VARIANT_COLUMNS[0], y), (VARIANT_COLUMNS[-1], y))
    page.draw_line((VARIANT_COLUMNS[1], rules[0]), (VARIANT_COLUMNS[1], rules[-1]))
    page.insert_text((MARGIN, rules[-1] + 30), "More heads help up to a point.", fontsize=BODY_SIZE)
    doc.save(path)
    doc.close()
    return path


# Table 2 of levels_of_agi: cells of several lines, paragraphs in a cell a blank line apart.
AUTONOMY_HEADER = [["Autonomy Level"], ["Example Systems"], ["Unlocking", "AGI Level(s)"],
                   ["Example Risks", "Introduced"]]
AUTONOMY_ROWS = [
    [["Autonomy Level 0:", "No AI", "human does every-", "thing"],
     ["Analogue approaches (e.g.,", "sketching with pencil on paper)", "", "Non-AI digital workflows",
      "(e.g., typing in a text editor;", "drawing in a paint program)"],
     ["No AI"], ["n/a (status quo risks)"]],
    [["Autonomy Level 1:", "AI as a Tool", "human fully controls", "task and uses AI to",
      "automate mundane", "sub-tasks"],
     ["Information-seeking with the", "aid of a search engine", "", "Revising writing with the",
      "aid of a grammar-checking", "program", "", "Reading a sign with a", "machine translation app"],
     ["Possible:", "Emerging Narrow AI", "", "Likely:", "Competent Narrow", "AI"],
     ["de-skilling", "(e.g., over-reliance)", "", "disruption of", "established", "industries"]],
    [["Autonomy Level 2:", "AI as a Consultant", "AI takes on a", "substantive role, but",
      "only when invoked by", "a human"],
     ["Relying on a language model", "to summarize a set of documents", "",
      "Accelerating computer program-", "ming with a code-generating", "model"],
     ["Possible:", "Competent Narrow", "AI", "", "Likely:", "Expert Narrow AI"],
     ["over-trust", "", "radicalization", "", "targeted", "manipulation"]],
]
# Level 1 with a first cell long enough to run past the blank lines of the cells beside it.
AUTONOMY_ROWS_LONG_LABEL = [
    AUTONOMY_ROWS[0],
    [[*AUTONOMY_ROWS[1][0][:5], "sub-tasks, such as", "spelling, search", "and the translation",
      "of short signs"], *AUTONOMY_ROWS[1][1:]],
    AUTONOMY_ROWS[2],
]
AUTONOMY_COLUMNS = (68, 168, 332, 443, 554)


def make_multiline_cell_table_pdf(path: str | Path, rows: Sequence = AUTONOMY_ROWS) -> Path:
    """One page: a heading, a "Table 2" caption and AUTONOMY_HEADER over ``rows`` in 10 pt,
    each cell's lines 13.5 pt apart from its row's top, a rule above and below each row."""
    path = Path(path)
    doc, page = _captioned_page("Autonomy", "Table 2: Levels of autonomy and their risks", 115)
    pitch = 13.5
    tops = [130.0]
    for row in [AUTONOMY_HEADER, *rows]:
        for x, lines in zip(AUTONOMY_COLUMNS, row, strict=False):
            for number, line in enumerate(lines):
                page.insert_text((x + 4, tops[-1] + 12 + number * pitch), line, fontsize=10)
        tops.append(tops[-1] + max(len(lines) for lines in row) * pitch + 6)
    for y in tops:
        page.draw_line((AUTONOMY_COLUMNS[0], y), (AUTONOMY_COLUMNS[-1], y))
    page.insert_text((MARGIN, tops[-1] + 30), "Higher levels carry more risk.", fontsize=BODY_SIZE)
    doc.save(path)
    doc.close()
    return path


def make_turned_pdf(path: str | Path, source: str | Path, turn: int, rotate: int = 0) -> Path:
    """The first page of ``source`` drawn turned by ``turn`` degrees (clockwise, in 90s) on a
    page of its own, given the /Rotate ``rotate``: turn 90 with rotate 90 is a landscape page
    shown upright, turn 90 with rotate 0 a page to be read sideways."""
    path = Path(path)
    with pymupdf.open(source) as original:
        width, height = original[0].rect.width, original[0].rect.height
        if turn % 180:
            width, height = height, width
        doc = pymupdf.open()
        page = doc.new_page(width=width, height=height)
        page.show_pdf_page(page.rect, original, 0, rotate=turn)
        page.set_rotation(rotate)
        doc.save(path)
        doc.close()
    return path


# A borderless table as annual reports set them: left-aligned text columns that wrap (here the
# label), then right-aligned values. A row is its cells, text first.
SEGMENTS_HEADER = ["Segment", "2023", "2022", "2021"]
SEGMENTS = [
    ["Footwear, including running, basketball and lifestyle shoes", "29,143", "28,021", "25,312"],
    ["Apparel", "13,843", "13,567", "12,865"],
    ["Equipment and accessories sold through our own stores, online and wholesale partners",
     "2,011", "1,929", "1,749"],
    ["Global Brand Divisions", "58", "102", "25"],
]
SEGMENT_COLUMNS = (MARGIN, 200, 290, 380, 470)  # each column's left edge, then the table's right
# A table with two text columns that wrap.
PROGRAMMES_HEADER = ["Programme", "Description", "Cost"]
PROGRAMMES = [
    ["Community sports grants",
     "Grants to local clubs for equipment, coaching and travel to competitions", "4.2"],
    ["Athlete development", "Scholarships for young athletes", "2.7"],
    ["Sustainability investments in our own supply chain",
     "Renewable energy and water recycling at supplier factories", "11.9"],
]
PROGRAMME_COLUMNS = (MARGIN, 160, 340, 420)
TABLE_FONT_SIZE = 9


def wrap_words(text: str, width: float, fontsize: float = TABLE_FONT_SIZE) -> list[str]:
    """``text`` broken into lines of Helvetica at ``fontsize`` no wider than ``width``, as a
    typesetter fills a column: each line takes every word that fits."""
    lines: list[str] = []
    for word in text.split():
        candidate = f"{lines[-1]} {word}" if lines else word
        if lines and pymupdf.get_text_length(candidate, fontsize=fontsize) <= width:
            lines[-1] = candidate
        else:
            lines.append(word)
    return lines


def make_borderless_table_pdf(path: str | Path, rows: Sequence[Sequence[str]] = SEGMENTS, *,
                              header: Sequence[str] = SEGMENTS_HEADER,
                              columns: Sequence[float] = SEGMENT_COLUMNS, text_columns: int = 1,
                              values_on: str = "first", pitch: float = 11,
                              row_gap: float = 6) -> Path:
    """One page: a heading, a paragraph, a "Table 4" caption and ``rows`` under ``header``
    in 9 pt without any rule. The first ``text_columns`` cells of a row are wrapped to their
    column's width (a cell holding "\\n" is broken there instead), lines ``pitch`` apart; the
    other cells are values, right-aligned on the row's ``values_on`` ("first" or "last")
    line. Rows are ``row_gap`` further apart than lines."""
    path = Path(path)
    doc, page = _captioned_page("Annual figures", "Table 4: Revenues by segment (USD millions)", 130)
    page.insert_text((MARGIN, 105), "Revenues grew in every segment over the three years.",
                     fontsize=BODY_SIZE)
    baseline = 150.0
    for number, row in enumerate([header, *rows]):
        font = "hebo" if number == 0 else "helv"
        texts = [cell.split("\n") if "\n" in cell else wrap_words(cell, right - left - 10)
                 for cell, left, right in zip(row[:text_columns], columns, columns[1:], strict=False)]
        for left, lines in zip(columns, texts, strict=False):
            for line_number, line in enumerate(lines):
                page.insert_text((left, baseline + line_number * pitch), line, fontname=font,
                                 fontsize=TABLE_FONT_SIZE)
        height = max(len(lines) for lines in texts)
        value_line = baseline + (height - 1) * pitch if values_on == "last" else baseline
        for right, value in zip(columns[text_columns + 1:], row[text_columns:], strict=False):
            width = pymupdf.get_text_length(value, fontname=font, fontsize=TABLE_FONT_SIZE)
            page.insert_text((right - 6 - width, value_line), value, fontname=font,
                             fontsize=TABLE_FONT_SIZE)
        baseline += height * pitch + row_gap
    page.insert_text((MARGIN, baseline + 20), "Footwear remained the largest segment.",
                     fontsize=BODY_SIZE)
    doc.save(path)
    doc.close()
    return path
