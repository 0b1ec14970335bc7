"""Table rows the layout engine's grid cuts wrongly: a cell printed across several rows is
given to each of them, a row cut through a cell of several lines is joined back."""

from __future__ import annotations

from pathlib import Path

import pytest

from propdex.extract import extract_document
from propdex.extract.table_rows import Rule, SpanningCell, continuation_rows, spanning_cells
from propdex.llm.offline_rules.tables import table_row_propositions
from propdex.models import ExtractedDocument
from propdex.settings import Settings
from tests.pdf_factory import (
    AUTONOMY_ROWS_LONG_LABEL,
    make_multiline_cell_table_pdf,
    make_row_group_table_pdf,
    make_row_label_table_pdf,
)
from tests.table_checks import rows_off_their_boxes

LAYOUT = Settings(pdf_reader="layout")


def rows(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("|") and "---" not in line]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("rows")
    return {
        "labelled": make_row_label_table_pdf(folder / "labelled.pdf"),
        "groups": make_row_group_table_pdf(folder / "groups.pdf"),
        "multiline": make_multiline_cell_table_pdf(folder / "multiline.pdf"),
        "long label": make_multiline_cell_table_pdf(folder / "long.pdf", AUTONOMY_ROWS_LONG_LABEL),
    }


@pytest.fixture(scope="module")
def read(built) -> dict[str, ExtractedDocument]:
    return {name: extract_document(path, LAYOUT) for name, path in built.items()}


def test_a_row_label_cut_by_the_grid_is_read_whole_in_each_row_it_spans(read) -> None:
    # The engine's grid reads "(A)" by character: its letter in the upper row, its brackets
    # in the lower one.
    assert ["|Model|EN-DE|EN-FR|Cost|", "|(A)|24.6|39.9|2.3e19|", "|(A)|25.1|40.4|9.6e18|",
            "|Big|28.4|41.8|1.1e20|"] == rows(read["labelled"].text)


def test_a_group_label_centred_over_its_rows_names_each_of_them(read) -> None:
    assert ["||h|dk|PPL|BLEU|", "|base|8|64|4.92|25.8|",
            "|(A)|1|512|5.29|24.9|", "|(A)|4|128|5.00|25.5|", "|(A)|16|32|4.91|25.8|",
            "|(A)|32|16|5.01|25.4|",
            "|(B)||16|5.16|25.1|", "|(B)||32|5.01|25.4|", "|(B)||8|5.30|24.8|",
            "|big|16||4.33|26.4|"] == rows(read["groups"].text)


def test_each_row_of_a_group_is_stated_with_its_label(read) -> None:
    statements = table_row_propositions(read["groups"].text, "Variations")
    assert ["In Table 3 (Variations on the base model), for (A), h is 1, dk is 512, PPL is 5.29, "
            "BLEU is 24.9.",
            "In Table 3 (Variations on the base model), for (A), h is 32, dk is 16, PPL is 5.01, "
            "BLEU is 25.4."] == [s for s in statements if "h is 1," in s or "h is 32," in s]


def test_a_row_filling_only_some_cells_under_a_cell_of_several_lines_joins_it(read) -> None:
    # The engine puts the third paragraph of "Example Systems" in a row of its own.
    level_one = rows(read["multiline"].text)[2]
    assert ("|Autonomy Level 1: AI as a Tool human fully controls task and uses AI to automate "
            "mundane sub-tasks|Information-seeking with the aid of a search engine Revising writing "
            "with the aid of a grammar-checking program Reading a sign with a machine translation "
            "app|Possible: Emerging Narrow AI Likely: Competent Narrow AI|de-skilling (e.g., "
            "over-reliance) disruption of established industries|") == level_one


def test_a_row_cut_through_its_first_cell_is_joined_back(read) -> None:
    # The engine cuts the row where the other cells have a blank line, through the first
    # cell's paragraph ("human fully controls" / "task and uses AI to").
    table = rows(read["long label"].text)
    assert (4, "|Autonomy Level 1: AI as a Tool human fully controls task and uses AI to automate "
               "mundane sub-tasks, such as spelling, search and the translation of short signs|"
               "Information-seeking with the aid of a search engine Revising writing with the aid "
               "of a grammar-checking program Reading a sign with a machine translation app|"
               "Possible: Emerging Narrow AI Likely: Competent Narrow AI|de-skilling (e.g., "
               "over-reliance) disruption of established industries|") == (len(table), table[2])


@pytest.mark.parametrize("name", ["labelled", "groups", "multiline", "long label"])
def test_each_row_slices_the_text_and_its_box_covers_its_cells(built, read, name: str) -> None:
    assert ([], True) == rows_off_their_boxes(read[name], built[name])


# --- The rules on grids given directly ------------------------------------------------------

def grid(tops: list[float], xs: list[float]) -> list[list[tuple[float, float, float, float]]]:
    return [[(x0, y0, x1, y1) for x0, x1 in zip(xs, xs[1:], strict=False)]
            for y0, y1 in zip(tops, tops[1:], strict=False)]


def word(x: float, top: float, text: str) -> tuple:
    return (x, top, x + 5 * len(text), top + 9, text)


def test_rows_of_one_line_each_in_a_ruled_group_stay_apart() -> None:
    # Table 3's rows inside a group: no rule between them, every cell a line of its own.
    cells = grid([0, 12, 24, 36], [0, 50, 100])
    words = [word(55, 1.5 + 12 * n, str(n)) for n in range(3)]
    rules = [Rule(0, 100, 0), Rule(0, 100, 36)]
    texts = [["", "0"], ["", "1"], ["", "2"]]
    assert [] == continuation_rows(texts, cells, words, rules)


def test_a_paragraph_going_on_across_a_rule_is_no_continuation() -> None:
    cells = grid([0, 24, 36], [0, 50, 100])
    words = [word(2, 1.5, "one"), word(2, 13.5, "two"), word(2, 25.5, "three")]
    rules = [Rule(0, 100, 24.5)]
    assert [] == continuation_rows([["one two", "x"], ["three", ""]], cells, words, rules)


def test_a_line_alone_in_the_middle_row_of_a_group_spans_it_in_the_first_column_only() -> None:
    # Elsewhere a centred line must be cut by a row line to count as a cell over several rows
    # (a value may stand alone in the middle row of a group).
    cells = grid([0, 12, 24, 36, 48], [0, 50, 100])
    rules = [Rule(0, 100, 12), Rule(0, 100, 48)]
    label, value = [word(2, 25.5, "(A)")], [word(55, 25.5, "7")]
    assert ([SpanningCell(0, 1, 3)], []) == (spanning_cells(cells, label, rules, body=1),
                                             spanning_cells(cells, value, rules, body=1))
