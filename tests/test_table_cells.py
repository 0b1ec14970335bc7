"""A phrase the layout engine's table grid cuts at a column boundary (a group header over two
columns, a value centred across two) is stored as one cell again (a cell printed across rows:
test_table_rows)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pymupdf
import pytest
from pymupdf.table import resolve_spans

from propdex.extract import extract_document
from propdex.extract.engine import _engine
from propdex.extract.table_cells import spanned_phrases
from propdex.llm.offline_rules.tables import table_row_propositions
from propdex.models import ExtractedDocument
from propdex.settings import Settings
from tests.pdf_factory import TextPiece, make_grouped_table_pdf


def layout_text(path: Path) -> str:
    return extract_document(path, Settings(pdf_reader="layout")).text


def rows(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("|") and "---" not in line]


def last_row(tmp_path: Path, spanning_value: list[TextPiece]) -> str:
    path = make_grouped_table_pdf(tmp_path / "grouped.pdf", spanning_value)
    return rows(layout_text(path))[-1]


@pytest.fixture(scope="module")
def grouped_path(tmp_path_factory) -> Path:
    return make_grouped_table_pdf(tmp_path_factory.mktemp("grouped") / "grouped.pdf")


@pytest.fixture(scope="module")
def grouped(grouped_path) -> ExtractedDocument:
    return extract_document(grouped_path, Settings(pdf_reader="layout"))


def test_a_group_header_names_each_column_under_it(grouped) -> None:
    assert ("|Model|BLEU on newstest2014|BLEU on newstest2014|Training Cost (FLOPs)|"
            "Training Cost (FLOPs)|") == rows(grouped.text)[0]


def test_a_value_centred_over_two_columns_is_one_cell(grouped) -> None:
    assert "|Transformer|28.4|41.8|2.3e19 for both tests||" == rows(grouped.text)[-1]


def test_offline_propositions_name_the_whole_group_header(grouped) -> None:
    [gnmt] = [s for s in table_row_propositions(grouped.text, "Results") if "GNMT" in s]
    assert ("In Table 2 (Scores and costs of the translation models), for GNMT, "
            "BLEU on newstest2014 EN-DE is 24.6, BLEU on newstest2014 EN-FR is 39.92, "
            "Training Cost (FLOPs) EN-DE is 2.3e19, Training Cost (FLOPs) EN-FR is 1.4e20.") == gnmt


def test_a_value_set_in_two_fonts_across_a_column_line_is_one_cell(tmp_path) -> None:
    # No span of the page crosses the line: the words either side are a word space apart.
    pieces = [("2.3e19", "helv", 9, 0), (" for both tests", "tiro", 9, 0)]
    assert "|Transformer|28.4|41.8|2.3e19 for both tests||" == last_row(tmp_path, pieces)


def test_a_cut_value_with_an_exponent_is_read_once(tmp_path) -> None:
    # The grid cuts "about" after "abo"; the span "about 2.3 ·" lies in the right-hand cell.
    pieces = [("about 2.3 ·", "helv", 9, 0), (" 10", "tiro", 9, 0), ("19", "tiro", 6, 3.5)]
    assert "|Transformer|28.4|41.8|about 2.3 · 10^19||" == last_row(tmp_path, pieces)


def test_a_cut_value_keeps_its_exponent(tmp_path) -> None:
    # The exponent lies in the left-hand cell, which alone holds no superscript reading.
    pieces = [("2.3 · 10", "helv", 9, 0), ("19", "helv", 6, 3.5), (" for both", "tiro", 9, 0)]
    assert "|Transformer|28.4|41.8|2.3 · 10^19 for both||" == last_row(tmp_path, pieces)


def engine_table(path: Path) -> tuple[pymupdf.Page, dict]:
    """The first page of ``path`` and its table as the layout engine finds it."""
    document_layout, _ = _engine()
    page = pymupdf.open(path)[0]
    with contextlib.redirect_stdout(io.StringIO()):
        parsed = document_layout.parse_document(page.parent, pages=[0], force_text=True,
                                                use_ocr=False)
    [table] = [box.table for box in parsed.pages[0].boxes if box.boxclass == "table"]
    return page, table


def test_the_phrases_joined_are_those_pymupdfs_resolve_spans_finds(grouped_path) -> None:
    # Where a phrase is one span of the page across a column line, PyMuPDF's own span
    # resolution finds it too (not where it is set in several fonts: see table_cells.py).
    page, table = engine_table(grouped_path)
    words = page.get_text("words")
    ours = [(number, phrase.text) for number, row in enumerate(table["extract"])
            for phrase in spanned_phrases(row, table["cells"][number], words)]
    library = [(number, " ".join(cell.text.split()))
               for number, row in enumerate(resolve_spans(page, table["cells"]))
               for cell in row if cell.colspan > 1]
    assert (3, library) == (len(ours), ours)


def test_a_word_overhanging_into_an_empty_header_cell_stays_in_its_own() -> None:
    rects = [(0.0, 0.0, 50.0, 12.0), (50.0, 0.0, 100.0, 12.0)]
    words = [(4.0, 1.0, 56.0, 11.0, "Throughput")]  # printed 6 pt past the column line
    assert [] == spanned_phrases(["Throughput", ""], rects, words)
