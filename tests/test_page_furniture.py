"""PDF page furniture (running headers, footers, page numbers) and two-column reading order."""

from __future__ import annotations

from pathlib import Path

import pytest

from propdex.extract import extract_document
from propdex.extract.furniture import furniture_key
from propdex.extract.pdf import PAGE_SEPARATOR
from propdex.settings import Settings
from tests.pdf_factory import make_pdf, make_two_column_pdf

HEADER = "Harbour Lights: A Survey of Coastal Beacons"
FOOTER = "Page {page} of {pages}"
BODIES = [
    "Lighthouses mark dangerous coastlines and guide ships into safe harbours.",
    "The first lighthouses were fires burning on hilltops near busy ports.",
    "Fresnel lenses made the light of a small lamp visible for many miles.",
    "Keepers lived beside the tower and trimmed the wicks through the night.",
    "Automation ended the keeper's trade in most countries by the late twentieth century.",
]


@pytest.fixture(params=["fast", "layout"])
def settings(request) -> Settings:
    # One furniture detector for both readers: the layout engine's lines go through it too.
    return Settings(pdf_reader=request.param)


@pytest.fixture
def fast() -> Settings:
    """Fast mode, for what its text looks like line by line (the layout reader writes
    paragraphs and Markdown headings instead)."""
    return Settings(pdf_reader="fast")


def page_texts(path: Path, settings: Settings) -> list[str]:
    doc = extract_document(path, settings)
    return [doc.text[span.start:span.end] for span in doc.pages]


def test_running_header_on_every_page_is_removed(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(tmp_path / "header.pdf", BODIES, header=HEADER)
    assert BODIES == page_texts(path, settings)


def test_footer_with_page_numbers_is_removed(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(tmp_path / "footer.pdf", BODIES, footer=FOOTER)
    assert BODIES == page_texts(path, settings)


def test_bare_page_numbers_are_removed(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(tmp_path / "numbers.pdf", BODIES, footer="{page}")
    assert BODIES == page_texts(path, settings)


def test_removed_lines_are_counted(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(tmp_path / "both.pdf", BODIES, header=HEADER, footer=FOOTER)
    assert 2 * len(BODIES) == extract_document(path, settings).furniture_removed


def test_text_without_furniture_joins_exact_page_spans(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(tmp_path / "both.pdf", BODIES, header=HEADER, footer=FOOTER)
    doc = extract_document(path, settings)
    assert (PAGE_SEPARATOR.join(BODIES), list(range(1, 6))) == (
        doc.text, [span.page for span in doc.pages]
    )


def test_repeated_body_line_is_kept(tmp_path: Path, settings: Settings) -> None:
    refrain = "Safety at sea depends on every light being lit."
    pages = [f"{body}\n\n\n\n\n\n\n\n{refrain}" for body in BODIES]
    path = make_pdf(tmp_path / "refrain.pdf", pages, header=HEADER)
    doc = extract_document(path, settings)
    assert (len(BODIES), len(BODIES)) == (doc.text.count(refrain), doc.furniture_removed)


def test_heading_printed_once_is_kept(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(tmp_path / "heading.pdf", BODIES, header=HEADER, heading="Coastal Beacons")
    first_line = extract_document(path, settings).text.split("\n")[0]
    assert "Coastal Beacons" == first_line.removeprefix("# ")


def test_a_heading_right_under_a_running_header_is_a_markdown_heading(tmp_path: Path) -> None:
    # The engine takes it into the running header's box (a page header), which loses the
    # header line to the furniture detector.
    path = make_pdf(tmp_path / "heading.pdf", BODIES, header=HEADER, heading="Coastal Beacons")
    doc = extract_document(path, Settings(pdf_reader="layout"))
    assert ("# Coastal Beacons", [("Coastal Beacons", 1, 0)]) == (
        doc.text.split("\n")[0], [(s.title, s.level, s.char_start) for s in doc.sections])


def test_title_in_display_type_repeating_the_running_header_is_kept(
    tmp_path: Path, fast: Settings
) -> None:
    path = make_pdf(tmp_path / "title.pdf", BODIES, header=HEADER, heading=HEADER)
    doc = extract_document(path, fast)
    assert ([HEADER, BODIES[0]], len(BODIES)) == (
        page_texts(path, fast)[0].split("\n"), doc.furniture_removed
    )


def test_line_at_the_top_of_a_few_pages_only_is_kept(tmp_path: Path, settings: Settings) -> None:
    # "Chapter" openings on two of ten pages: repeated, but not running furniture.
    pages = [("Chapter summary\n" if i in (0, 5) else "") + f"Body text of page {i}." for i in range(10)]
    path = make_pdf(tmp_path / "chapters.pdf", pages)
    assert 2 == extract_document(path, settings).text.count("Chapter summary")


def test_numbered_record_line_at_the_top_of_every_page_is_kept(
    tmp_path: Path, settings: Settings
) -> None:
    pages = [f"Logbook page {n} records drill core sample {n} from the basalt plateau."
             for n in range(1, 6)]
    path = make_pdf(tmp_path / "logbook.pdf", pages, footer="{page}")
    assert pages == page_texts(path, settings)


def test_one_page_document_loses_nothing(tmp_path: Path, fast: Settings) -> None:
    path = make_pdf(tmp_path / "one.pdf", BODIES[:1], header=HEADER, footer=FOOTER)
    doc = extract_document(path, fast)
    assert ({HEADER, BODIES[0], "Page 1 of 1"}, 0) == (
        set(doc.text.split("\n")), doc.furniture_removed
    )


def test_text_files_have_no_furniture_count(tmp_path: Path, settings: Settings) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("Plain notes.\n", encoding="utf-8")
    assert None is extract_document(path, settings).furniture_removed


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("Page 3 of 19", "page # of #"),
        ("Page 17 of 19", "page # of #"),
        ("  xiv ", "#"),
        ("Levels of  AGI", "levels of agi"),
        ("- 12 -", "- # -"),
    ],
)
def test_furniture_key_normalises_numbers_case_and_spacing(line: str, key: str) -> None:
    assert key == furniture_key(line)


# --- Two columns ----------------------------------------------------------------------------

LEFT = [f"Left sentence {n} is about the apples." for n in range(1, 10)]
RIGHT = [f"Right sentence {n} is about the pears." for n in range(1, 10)]


@pytest.mark.parametrize("order", ["lines", "paragraphs", "columns"])
def test_two_columns_read_column_by_column(tmp_path: Path, fast: Settings, order: str) -> None:
    path = make_two_column_pdf(tmp_path / f"{order}.pdf", LEFT, RIGHT, order=order)
    assert LEFT + RIGHT == extract_document(path, fast).text.split("\n")


def test_full_width_lines_stay_above_and_below_the_columns(
    tmp_path: Path, fast: Settings
) -> None:
    title = "Orchard Report on Apples and Pears"
    closing = "Both harvests were larger than the year before, and the orchard hired more pickers."
    path = make_two_column_pdf(tmp_path / "report.pdf", LEFT, RIGHT, title=title, closing=closing)
    assert [title, *LEFT, *RIGHT, closing] == extract_document(path, fast).text.split("\n")


def test_table_rows_are_not_read_as_columns(tmp_path: Path, fast: Settings) -> None:
    # Two table columns written row by row look like interleaved columns, but their cells
    # leave most of each side empty: the rows stay together.
    levels = ["Level 0: No AI", "Level 1: Emerging, unreliable but general", "Level 2: Competent",
              "Level 3: Expert", "Level 4: Virtuoso, beyond most people", "Level 5: Superhuman"]
    systems = ["calculator software", "ChatGPT, Bard and Llama 2 in their 2023 versions",
               "not yet achieved", "Imagen, Dall-E 2", "AlphaGo", "AlphaFold, AlphaZero and Stockfish"]
    path = make_two_column_pdf(tmp_path / "table.pdf", levels, systems, order="lines")
    rows = [cell for pair in zip(levels, systems, strict=False) for cell in pair]
    assert rows == extract_document(path, fast).text.split("\n")


# --- Reference corpus -------------------------------------------------------------------------

RUNNING_TITLE = "Levels of AGI: Operationalizing Progress on the Path to AGI"


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("name", "removed"),
    [("levels_of_agi.pdf", 36), ("attention_is_all_you_need.pdf", 14),
     ("mck_energy_first_5_pages.pdf", 8)],
)
def test_corpus_pdf_furniture_removed(corpus: Path, fast: Settings, name: str,
                                      removed: int) -> None:
    assert removed == extract_document(corpus / name, fast).furniture_removed


@pytest.mark.corpus
def test_corpus_running_title_is_gone_but_the_title_page_keeps_it(
    corpus: Path, fast: Settings
) -> None:
    doc = extract_document(corpus / "levels_of_agi.pdf", fast)
    first_page = doc.text[doc.pages[0].start:doc.pages[0].end]
    # Page 1 sets the title on two lines in display type; pages 2-19 repeat it as a header.
    assert (0, True) == (doc.text.count(RUNNING_TITLE),
                         "Levels of AGI: Operationalizing Progress on\nthe Path to AGI" in first_page)
