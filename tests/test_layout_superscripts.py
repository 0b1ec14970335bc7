"""Superscripts in layout-mode text: an exponent is written with a caret, a footnote mark
stays apart from its word and from the first word of its footnote."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from propdex.extract import extract_document
from propdex.settings import Settings
from tests.pdf_factory import MARGIN, PAGE_RECT
from tests.test_layout_spans import PROSE, layout_line, make_pdf_with_pieces

LAYOUT = Settings(pdf_reader="layout")
BODY = 11
SMALL = 7
RISE = -4  # a superscript's baseline shift (PDF y grows downwards)
FOOTNOTE = ("To illustrate why the products grow large, assume that the components are "
            "independent random variables with mean zero and variance one.")
FIRST_LINE, _, SECOND_LINE = FOOTNOTE.partition(" the components ")
FIRST_LINE += " the"
SECOND_LINE = "components " + SECOND_LINE


def _write_pieces(page: pymupdf.Page, x: float, y: float, pieces: list[tuple[str, float, float]]) -> None:
    """Write (text, font size, baseline shift) pieces one after the other from (x, y)."""
    for text, size, shift in pieces:
        page.insert_text((x, y + shift), text, fontsize=size)
        x += pymupdf.get_text_length(text, fontsize=size)


def _footnote_pdf(path: Path) -> Path:
    """A page of prose, and at its foot a footnote that opens with its raised mark."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    page.insert_textbox(pymupdf.Rect(MARGIN, 72, PAGE_RECT.width - MARGIN, 400), PROSE * 4, fontsize=BODY)
    page.draw_line((MARGIN, 740), (MARGIN + 150, 740))
    _write_pieces(page, MARGIN, 760, [("4", 6, RISE), (FIRST_LINE, 9, 0)])
    page.insert_text((MARGIN, 772), SECOND_LINE, fontsize=9)
    doc.save(path)
    return path


def test_a_footnote_mark_stays_apart_from_the_footnote_first_word(tmp_path: Path) -> None:
    text = extract_document(_footnote_pdf(tmp_path / "note.pdf"), LAYOUT).text
    assert f"> 4 {FOOTNOTE}" == text.split("\n\n")[-1]


def test_an_exponent_in_running_text_is_written_with_a_caret(tmp_path: Path) -> None:
    pieces = [("Training took 2.3 · 10", BODY, 0), ("19", SMALL, RISE), (" operations in all.", BODY, 0)]
    assert "Training took 2.3 · 10^19 operations in all." == layout_line(
        make_pdf_with_pieces(tmp_path / "p.pdf", pieces))


def test_an_exponent_over_two_spans_is_one_exponent(tmp_path: Path) -> None:
    pieces = [("The rate was 10", BODY, 0), ("-", SMALL, RISE), ("9", SMALL, RISE), (" at the start.", BODY, 0)]
    assert "The rate was 10^-9 at the start." == layout_line(
        make_pdf_with_pieces(tmp_path / "p.pdf", pieces))


COST_ROWS = [
    [[("Model", BODY, 0)], [("Training cost", BODY, 0)]],
    [[("Transformer", BODY, 0)], [("3.3 · 10", BODY, 0), ("18", SMALL, RISE)]],
    [[("ConvS2S", BODY, 0)], [("9.6 · 10", BODY, 0), ("18", SMALL, RISE)]],
]


def _cost_table_pdf(path: Path) -> Path:
    """A paragraph, a caption and a ruled table whose cells hold exponents."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    page.insert_textbox(pymupdf.Rect(MARGIN, 72, PAGE_RECT.width - MARGIN, 160), PROSE, fontsize=BODY)
    page.insert_text((MARGIN, 185), "Table 1: Training cost in operations", fontsize=10)
    columns, top, height = (MARGIN, MARGIN + 160, MARGIN + 320), 200, 22
    for number, row in enumerate(COST_ROWS):
        for x, cell in zip(columns, row, strict=False):
            _write_pieces(page, x + 5, top + number * height + 15, cell)
    for number in range(len(COST_ROWS) + 1):
        page.draw_line((columns[0], top + number * height), (columns[-1], top + number * height))
    for x in columns:
        page.draw_line((x, top), (x, top + len(COST_ROWS) * height))
    doc.save(path)
    return path


def test_an_exponent_in_a_table_cell_is_written_with_a_caret(tmp_path: Path) -> None:
    text = extract_document(_cost_table_pdf(tmp_path / "cost.pdf"), LAYOUT).text
    table = next(p for p in text.split("\n\n") if p.startswith("|"))
    assert ("|Model|Training cost|\n|---|---|\n|Transformer|3.3 · 10^18|\n|ConvS2S|9.6 · 10^18|"
            == table)


def _formula_pdf(path: Path) -> Path:
    """Prose, a displayed formula with a raised "T" and its number, prose."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    page.insert_textbox(pymupdf.Rect(72, 72, 523, 160), PROSE, fontsize=BODY)
    x = 200.0
    for text, size, shift in [("softmax(QK", BODY, 0), ("T", SMALL, RISE), (")V", BODY, 0)]:
        page.insert_text((x, 200 + shift), text, fontsize=size, fontname="tiit")
        x += pymupdf.get_text_length(text, fontname="tiit", fontsize=size)
    page.insert_text((500, 200), "(1)", fontsize=BODY)
    page.insert_textbox(pymupdf.Rect(72, 230, 523, 320), PROSE, fontsize=BODY)
    doc.save(path)
    return path


def test_a_displayed_formula_is_spaced_as_printed_with_its_exponent(tmp_path: Path) -> None:
    text = extract_document(_formula_pdf(tmp_path / "formula.pdf"), LAYOUT).text
    assert "softmax(QK^T)V (1)" == text.split("\n\n")[1]
