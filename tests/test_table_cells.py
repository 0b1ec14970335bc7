"""A phrase the layout engine's table grid cuts at a column boundary (a group header over two
columns, a value centred across two) is stored as one cell again."""

from __future__ import annotations

import pytest

from propdex.extract import extract_document
from propdex.extract.table_cells import join_spanning_cells
from propdex.llm.offline_rules.tables import table_row_propositions
from propdex.models import ExtractedDocument
from propdex.settings import Settings
from tests.pdf_factory import make_grouped_table_pdf


@pytest.fixture(scope="module")
def grouped(tmp_path_factory) -> ExtractedDocument:
    path = make_grouped_table_pdf(tmp_path_factory.mktemp("grouped") / "grouped.pdf")
    return extract_document(path, Settings(pdf_reader="layout"))


def rows(doc: ExtractedDocument) -> list[str]:
    return [line for line in doc.text.split("\n") if line.startswith("|")]


def test_a_group_header_names_each_column_under_it(grouped) -> None:
    assert ("|Model|BLEU on newstest2014|BLEU on newstest2014|Training Cost (FLOPs)|"
            "Training Cost (FLOPs)|") == rows(grouped)[0]


def test_a_value_centred_over_two_columns_is_one_cell(grouped) -> None:
    assert "|Transformer|28.4|41.8|2.3e19 for both tests||" == rows(grouped)[-1]


def test_offline_propositions_name_the_whole_group_header(grouped) -> None:
    [gnmt] = [s for s in table_row_propositions(grouped.text, "Results") if "GNMT" in s]
    assert ("In Table 2 (Scores and costs of the translation models), for GNMT, "
            "BLEU on newstest2014 EN-DE is 24.6, BLEU on newstest2014 EN-FR is 39.92, "
            "Training Cost (FLOPs) EN-DE is 2.3e19, Training Cost (FLOPs) EN-FR is 1.4e20.") == gnmt


def test_a_word_overhanging_into_an_empty_header_cell_stays_in_its_own() -> None:
    rects = [(0.0, 0.0, 50.0, 12.0), (50.0, 0.0, 100.0, 12.0)]
    words = [(4.0, 1.0, 56.0, 11.0, "Throughput")]  # printed 6 pt past the column line
    assert ["Throughput", ""] == join_spanning_cells(["Throughput", ""], rects, words, header=True)
