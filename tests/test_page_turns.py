"""A paragraph the page turn or a column break cuts is read as one paragraph, as a reader
turning the page reads it; page spans still slice each page's text exactly."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from propdex.extract import extract_document
from propdex.extract.pdf import PAGE_SEPARATOR
from propdex.models import ExtractedDocument
from propdex.regions import boxes_for_span
from propdex.settings import Settings
from tests.pdf_factory import MARGIN, PAGE_RECT, make_pdf

LAYOUT = Settings(pdf_reader="layout")
FAST = Settings(pdf_reader="fast")

REEF_START = ("The survey team dived on the outer reef every morning of the season. "
              "On the last day of the season the divers counted the coral colonies")
REEF_REST = ("of the outer reef one by one and compared them with the counts of the year "
             "before. The comparison showed a slow recovery after the bleaching.")
RANGER_START = ("The survey team dived on the outer reef every morning of the season, and on "
                "the last day of the season the divers were led by the senior ranger of the "
                "marine park, Captain")
RANGER_REST = ("Morgan Blake, who counted the coral colonies one by one and compared them "
               "with the counts of the year before.")
REEF_END = ("The survey team dived on the outer reef every morning of the season. On the last "
            "day of the season the divers counted the coral colonies of the outer reef.")
NEXT_PARAGRAPH = ("Divers of the second team measured the water temperature at dawn and at "
                  "dusk on each of the forty days.")
AUTHORS = ("Morgan Blake 1, Ada Quinn 2, Rafael Ortiz 1, Tomasz Nowak 2, Lena Fischer 1, "
           "Priya Raman 2, Omar Haddad 1 and Grace Liu 1")
FOOTNOTE = "1 The counts were made by two divers and averaged."


def page(doc: ExtractedDocument, number: int) -> str:
    span = doc.pages[number - 1]
    return doc.text[span.start:span.end]


def test_a_sentence_the_page_turn_cuts_is_one_sentence(tmp_path: Path) -> None:
    doc = extract_document(make_pdf(tmp_path / "reef.pdf", [REEF_START, REEF_REST]), LAYOUT)
    assert f"{REEF_START} {REEF_REST}" == doc.text


def test_page_spans_still_slice_each_page_after_the_join(tmp_path: Path) -> None:
    doc = extract_document(make_pdf(tmp_path / "reef.pdf", [REEF_START, REEF_REST]), LAYOUT)
    assert [REEF_START, REEF_REST] == [page(doc, 1), page(doc, 2)]


def test_a_capitalised_word_after_the_page_turn_goes_on_with_an_unfinished_sentence(
        tmp_path: Path) -> None:
    doc = extract_document(make_pdf(tmp_path / "ranger.pdf", [RANGER_START, RANGER_REST]), LAYOUT)
    assert f"{RANGER_START} {RANGER_REST}" == doc.text


def test_a_finished_paragraph_and_the_next_pages_first_stay_two(tmp_path: Path) -> None:
    doc = extract_document(make_pdf(tmp_path / "reef.pdf", [REEF_END, NEXT_PARAGRAPH]), LAYOUT)
    assert f"{REEF_END}{PAGE_SEPARATOR}{NEXT_PARAGRAPH}" == doc.text


def test_an_author_list_ending_a_page_does_not_run_into_the_next(tmp_path: Path) -> None:
    doc = extract_document(make_pdf(tmp_path / "authors.pdf", [AUTHORS, NEXT_PARAGRAPH]), LAYOUT)
    assert f"{AUTHORS}{PAGE_SEPARATOR}{NEXT_PARAGRAPH}" == doc.text


def test_fast_mode_keeps_the_page_break(tmp_path: Path) -> None:
    doc = extract_document(make_pdf(tmp_path / "reef.pdf", [REEF_START, REEF_REST]), FAST)
    assert PAGE_SEPARATOR in doc.text
    assert doc.text.startswith("The survey team") and doc.text.endswith("after the bleaching.")


def _cut_by_the_page_turn(path: Path, first_page=lambda page: 0.0) -> Path:
    """``first_page`` writes what stands above REEF_START on page 1 (returning where it ends);
    REEF_START follows with a footnote in small type at the page's foot, and REEF_REST goes
    on at the top of page 2."""
    doc = pymupdf.open()
    first = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    top = max(MARGIN, first_page(first))
    first.insert_textbox(pymupdf.Rect(MARGIN, top, PAGE_RECT.width - MARGIN, top + 120), REEF_START,
                         fontsize=11)
    first.draw_line((MARGIN, PAGE_RECT.height - 110), (MARGIN + 150, PAGE_RECT.height - 110))
    first.insert_textbox(pymupdf.Rect(MARGIN, PAGE_RECT.height - 104, PAGE_RECT.width - MARGIN,
                                      PAGE_RECT.height - 60), FOOTNOTE, fontsize=8)
    second = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    second.insert_textbox(pymupdf.Rect(MARGIN, MARGIN, PAGE_RECT.width - MARGIN, 200), REEF_REST,
                          fontsize=11)
    doc.save(path)
    doc.close()
    return path


def test_a_footnote_below_the_cut_sentence_moves_above_its_paragraph(tmp_path: Path) -> None:
    doc = extract_document(_cut_by_the_page_turn(tmp_path / "footnote.pdf"), LAYOUT)
    footnote, paragraph = page(doc, 1).split("\n\n")
    assert (FOOTNOTE, f"{REEF_START} {REEF_REST}") == (
        footnote.removeprefix("> "), doc.text[doc.text.index(paragraph):])


def test_the_boxes_of_a_joined_sentence_lie_on_both_pages(tmp_path: Path) -> None:
    doc = extract_document(make_pdf(tmp_path / "reef.pdf", [REEF_START, REEF_REST]), LAYOUT)
    start = doc.text.index("the divers counted")
    end = doc.text.index("one by one")
    assert [1, 2] == [box.page for box in boxes_for_span(doc.regions, start, end)]


def _two_columns(path: Path, left: str, right: str) -> Path:
    doc = pymupdf.open()
    sheet = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    middle = PAGE_RECT.width / 2
    sheet.insert_textbox(pymupdf.Rect(MARGIN, MARGIN, middle - 10, PAGE_RECT.height - MARGIN),
                         left, fontsize=11)
    sheet.insert_textbox(pymupdf.Rect(middle + 10, MARGIN, PAGE_RECT.width - MARGIN,
                                      PAGE_RECT.height - MARGIN), right, fontsize=11)
    doc.save(path)
    doc.close()
    return path


def test_a_sentence_a_column_break_cuts_before_a_capital_is_one_sentence(tmp_path: Path) -> None:
    # The right column goes on with the sentence the left column ends with.
    left = " ".join([REEF_END] * 9 + [RANGER_START])
    doc = extract_document(_two_columns(tmp_path / "columns.pdf", left, RANGER_REST), LAYOUT)
    assert doc.text.endswith(f"Captain {RANGER_REST}")


def _paragraph_and_heading(page: pymupdf.Page) -> float:
    """A finished paragraph and a heading above the paragraph the page turn cuts."""
    page.insert_textbox(pymupdf.Rect(MARGIN, MARGIN, PAGE_RECT.width - MARGIN, 160),
                        NEXT_PARAGRAPH, fontsize=11)
    page.insert_text((MARGIN, 190), "Coral Counts", fontsize=16, fontname="hebo")
    return 200


def test_a_footnote_moved_above_the_cut_paragraph_stays_before_its_heading(tmp_path: Path) -> None:
    doc = extract_document(_cut_by_the_page_turn(tmp_path / "heading.pdf", _paragraph_and_heading),
                           LAYOUT)
    assert [NEXT_PARAGRAPH, FOOTNOTE, "Coral Counts", f"{REEF_START} {REEF_REST}"] == [
        block.lstrip("#> ").strip() for block in doc.text.split("\n\n")]
