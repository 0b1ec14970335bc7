"""A borderless table that the layout engine cut after each line of a wrapped label is read
with one row per logical row; rows without clear evidence of wrapping stay as cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from propdex.extract import extract_document
from propdex.extract.table_rows import Rule
from propdex.extract.table_wraps import wrapped_rows
from propdex.llm.offline_rules.tables import table_row_propositions
from propdex.models import ExtractedDocument
from propdex.settings import Settings
from tests.pdf_factory import (
    PROGRAMME_COLUMNS,
    PROGRAMMES,
    PROGRAMMES_HEADER,
    SEGMENTS,
    make_borderless_table_pdf,
)
from tests.table_checks import rows_off_their_boxes
from tests.table_checks import table_lines as rows

LAYOUT = Settings(pdf_reader="layout")
HEADER = "|Segment|2023|2022|2021|"
JOINED = [
    HEADER,
    "|Footwear, including running, basketball and lifestyle shoes|29,143|28,021|25,312|",
    "|Apparel|13,843|13,567|12,865|",
    "|Equipment and accessories sold through our own stores, online and wholesale partners|"
    "2,011|1,929|1,749|",
    "|Global Brand Divisions|58|102|25|",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("wraps")
    return {
        # 12 pt between lines, 4 pt more between rows: the engine cuts both wrapped labels.
        "values first": make_borderless_table_pdf(folder / "first.pdf", pitch=12, row_gap=4),
        "values last": make_borderless_table_pdf(folder / "last.pdf", values_on="last", pitch=12,
                                                 row_gap=4),
        "single lines": make_borderless_table_pdf(
            folder / "single.pdf", [["Footwear", "29,143", "28,021", "25,312"],
                                    ["Apparel", "13,843", "13,567", "12,865"],
                                    ["Global Brand Divisions", "58", "102", "25"]], pitch=12),
        # A row-group header on the line above its one item, at the line pitch.
        "group header": make_borderless_table_pdf(
            folder / "group.pdf", [SEGMENTS[0], ["Costs\nCost of sales", "20,001", "19,002", "18,003"],
                                   SEGMENTS[2]], values_on="last", row_gap=4),
        "no row gap": make_borderless_table_pdf(folder / "tight.pdf", pitch=12, row_gap=0),
        # Here the engine keeps the first label's two lines in one cell.
        "no row gap, label kept": make_borderless_table_pdf(folder / "kept.pdf", pitch=10.5,
                                                            row_gap=0),
        "two text columns": make_borderless_table_pdf(
            folder / "programmes.pdf", PROGRAMMES, header=PROGRAMMES_HEADER,
            columns=PROGRAMME_COLUMNS, text_columns=2, values_on="last", row_gap=3),
    }


@pytest.fixture(scope="module")
def read(built) -> dict[str, ExtractedDocument]:
    return {name: extract_document(path, LAYOUT) for name, path in built.items()}


def test_a_label_wrapped_under_its_values_is_one_row(read) -> None:
    assert JOINED == rows(read["values first"].text)


def test_a_label_wrapped_above_its_values_is_one_row(read) -> None:
    assert JOINED == rows(read["values last"].text)


def test_rows_whose_label_and_description_both_wrap_are_one_row_each(read) -> None:
    assert ["|Programme|Description|Cost|",
            "|Community sports grants|Grants to local clubs for equipment, coaching and travel to "
            "competitions|4.2|",
            "|Athlete development|Scholarships for young athletes|2.7|",
            "|Sustainability investments in our own supply chain|Renewable energy and water "
            "recycling at supplier factories|11.9|"] == rows(read["two text columns"].text)


def test_a_borderless_table_of_single_line_rows_is_unchanged(read) -> None:
    assert [HEADER, "|Footwear|29,143|28,021|25,312|", "|Apparel|13,843|13,567|12,865|",
            "|Global Brand Divisions|58|102|25|"] == rows(read["single lines"].text)


def test_a_group_header_above_its_one_item_stays_a_row_of_its_own(read) -> None:
    # "Costs" ends far short of the column's width: the line was not wrapped.
    assert ["|Costs||||", "|Cost of sales|20,001|19,002|18,003|"] == rows(read["group header"].text)[2:4]


def test_rows_set_at_the_line_pitch_stay_as_the_engine_cut_them(read) -> None:
    # Without a wider step between rows nothing tells which row a lone label line belongs to.
    assert ["|Footwear, including running,|29,143|28,021|25,312|", "|basketball and lifestyle shoes||||"
            ] == rows(read["no row gap"].text)[1:3]


def test_a_row_under_a_label_of_two_lines_at_the_line_pitch_is_no_continuation(read) -> None:
    # The label's lines go on at their pitch into the next row, but in a table without rules
    # that is only how the rows are set; the values say they are two rows.
    assert ["|Footwear, including running, basketball and lifestyle shoes|29,143|28,021|25,312|",
            "|Apparel|13,843|13,567|12,865|"] == rows(read["no row gap, label kept"].text)[1:3]


def test_the_joined_row_is_stated_with_its_whole_label(read) -> None:
    statements = table_row_propositions(read["values last"].text, "Annual figures")
    assert ["In Table 4 (Revenues by segment (USD millions)), for Equipment and accessories sold "
            "through our own stores, online and wholesale partners, 2023 is 2,011, 2022 is 1,929, "
            "2021 is 1,749."] == [s for s in statements if "Equipment" in s]


@pytest.mark.parametrize("name", ["values first", "values last", "two text columns"])
def test_each_joined_row_slices_the_text_and_its_box_covers_its_cells(built, read, name: str) -> None:
    assert ([], True) == rows_off_their_boxes(read[name], built[name])


def test_fast_mode_reads_the_lines_as_printed(built) -> None:
    text = extract_document(built["values last"], Settings(pdf_reader="fast")).text
    assert (["Equipment and accessories sold", "through our own stores, online"], []) == (
        [line for line in text.split("\n") if line.startswith(("Equipment", "through"))],
        rows(text))


# --- The rule on grids given directly -------------------------------------------------------

def test_rows_at_the_line_pitch_that_both_hold_a_value_stay_apart() -> None:
    # A contents page: each entry's title fills the column, the page numbers are values.
    tops = [0, 20, 32, 52]
    rects = [[(0, top, 200, top + 12), (200, top, 240, top + 12)] for top in tops]
    words = [w for top in tops for w in ((0, top, 198, top + 10, "Title"), (220, top, 230, top + 10, "8"))]
    texts = [["Contents", "Page"], ["Title one", "8"], ["Title two", "8"], ["Title three", "9"]]
    assert [] == wrapped_rows(texts, rects, words, [Rule(0, 240, 16)])
