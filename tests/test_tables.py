"""Markdown tables: kept whole in a chunk or split between rows with their head, and stated
row by row by the offline propositions."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from propdex.cache import ResultCache
from propdex.chunking import chunk_document
from propdex.chunking.tables import chunk_row_span, find_tables
from propdex.extract import extract_document
from propdex.llm.offline import OfflineBackend
from propdex.models import DocumentContext
from propdex.pipeline.headers import attach_headers
from propdex.pipeline.propositions import propositions_for_document
from propdex.pipeline.rows import proposition_rows
from propdex.regions import boxes_for_span
from propdex.settings import Settings
from tests import pdf_factory

PROSE = "The models were trained on the WMT 2014 data for three days. " * 4
CAPTION = "Table 2: BLEU scores of translation models on newstest2014."
HEADER = "| Model | EN-DE | EN-FR |\n|---|---|---|"
SHORT_ROWS = ["| ByteNet | 23.75 | |", "| Transformer (big) | 28.4 | 41.8 |"]
LONG_ROWS = [f"| Model number {n} | {20 + n / 10:.1f} | {30 + n / 10:.1f} |" for n in range(30)]


def write_markdown(path: Path, *blocks: str) -> Path:
    path.write_text("# Results\n\n" + "\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def table(rows: list[str], header: str = HEADER) -> str:
    return "\n".join([header, *rows])


def table_chunks(path: Path, chunk_size: int = 800):
    doc = extract_document(path, Settings())
    chunks = chunk_document(doc, Settings(chunk_size=chunk_size))
    return doc, [c for c in chunks if "|" in c.text]


def test_a_table_that_fits_is_one_chunk_with_its_caption_and_no_prose(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(SHORT_ROWS), PROSE)
    _, chunks = table_chunks(path)
    assert [(f"{CAPTION}\n\n{table(SHORT_ROWS)}", "")] == [(c.text, c.table_head) for c in chunks]


def test_a_heading_right_above_a_table_joins_its_chunk(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, "## Scores", CAPTION, table(SHORT_ROWS), "## Next", PROSE)
    _, chunks = table_chunks(path)
    assert [f"## Scores\n\n{CAPTION}\n\n{table(SHORT_ROWS)}"] == [c.text for c in chunks]


def test_a_caption_after_the_table_travels_with_it(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, table(SHORT_ROWS), CAPTION, PROSE)
    _, chunks = table_chunks(path)
    assert [f"{table(SHORT_ROWS)}\n\n{CAPTION}"] == [c.text for c in chunks]


def test_a_caption_wrapped_over_two_paragraphs_is_found(tmp_path: Path) -> None:
    wrapped = "Table 4: Parsing results (Results are on Section 23"
    path = write_markdown(tmp_path / "r.md", PROSE, wrapped, "of WSJ)", table(SHORT_ROWS))
    _, chunks = table_chunks(path)
    assert [f"{wrapped}\n\nof WSJ)\n\n{table(SHORT_ROWS)}"] == [c.text for c in chunks]


def test_a_long_table_is_split_between_rows(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(LONG_ROWS), PROSE)
    _, chunks = table_chunks(path, chunk_size=300)
    rows = [line for c in chunks for line in c.text.split("\n") if line.startswith("| Model number")]
    assert (True, LONG_ROWS) == (len(chunks) > 2, rows)


def test_every_part_of_a_split_table_has_the_caption_and_header_rows(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(LONG_ROWS), PROSE)
    _, chunks = table_chunks(path, chunk_size=300)
    context = DocumentContext(title="Translation", summary="BLEU scores.")
    attach_headers(chunks, context)
    with_head = [CAPTION in c.embed_text and HEADER in c.embed_text for c in chunks]
    assert [True] * len(chunks) == with_head


def test_parts_of_a_split_table_lack_only_what_their_text_lacks(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(LONG_ROWS), PROSE)
    _, chunks = table_chunks(path, chunk_size=300)
    assert ["", *[f"{CAPTION}\n\n{HEADER}"] * (len(chunks) - 1)] == [c.table_head for c in chunks]


def test_table_parts_fit_the_chunk_size_and_slice_the_stored_text(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(LONG_ROWS), PROSE)
    doc, chunks = table_chunks(path, chunk_size=300)
    assert [(c.text, True) for c in chunks] == [
        (doc.text[c.char_start : c.char_end], len(c.text) <= 300) for c in chunks]


def test_a_row_longer_than_a_chunk_is_a_chunk_of_its_own(tmp_path: Path) -> None:
    long_row = "| Model number 9 | " + "very long cell text " * 20 + "| 1.0 |"
    rows = [*LONG_ROWS[:3], long_row, *LONG_ROWS[3:6]]
    path = write_markdown(tmp_path / "r.md", CAPTION, table(rows))
    _, chunks = table_chunks(path, chunk_size=200)
    assert [long_row] == [c.text for c in chunks if "very long" in c.text]


def test_the_passages_chunker_keeps_a_table_whole(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(SHORT_ROWS), PROSE)
    doc = extract_document(path, Settings())
    chunks = chunk_document(doc, Settings(chunker="passages"))
    assert [f"{CAPTION}\n\n{table(SHORT_ROWS)}"] == [c.text for c in chunks if "|" in c.text]


def test_the_fixed_chunker_treats_a_table_as_text(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(SHORT_ROWS))
    doc = extract_document(path, Settings())
    chunks = chunk_document(doc, Settings(chunker="fixed", chunk_size=1000))
    assert [(doc.text.strip(), "")] == [(c.text, c.table_head) for c in chunks]


def test_an_indented_table_starts_at_its_first_pipe() -> None:
    text = f"Intro.\n\n  {HEADER.replace(chr(10), chr(10) + '  ')}\n  {SHORT_ROWS[0]}"
    [found] = find_tables(text)
    assert "| Model" == text[found.start : found.start + 7]


def test_header_continuation_rows_are_part_of_the_head() -> None:
    text = "| | BLEU | |\n|---|---|---|\n| Model | | |\n| | EN-DE | EN-FR |\n| ByteNet | 23.75 | |"
    [found] = find_tables(text)
    assert "| ByteNet | 23.75 | |" == text[found.head_end:].strip()


# --- Offline propositions of table rows ---------------------------------------------------


@pytest.fixture
def backend() -> OfflineBackend:
    return OfflineBackend(Settings())


def test_each_row_is_stated_naming_table_row_and_columns(backend) -> None:
    text = f"{CAPTION}\n\n{table(SHORT_ROWS)}"
    statements = [p for p in backend.propositions(text, title="T", section=None).value
                  if p.startswith("In Table")]
    assert [
        "In Table 2 (BLEU scores of translation models on newstest2014), for ByteNet, EN-DE is 23.75.",
        "In Table 2 (BLEU scores of translation models on newstest2014), for Transformer (big), "
        "EN-DE is 28.4, EN-FR is 41.8.",
    ] == statements


def test_header_rows_are_joined_into_column_names(backend) -> None:
    text = ("Table 2: Scores.\n\n| | BLEU | BLEU |\n|---|---|---|\n| | EN-DE | EN-FR |\n"
            "| Transformer (big) | 28.4 | 41.8 |")
    assert ["In Table 2 (Scores), for Transformer (big), BLEU EN-DE is 28.4, BLEU EN-FR is 41.8."] == [
        p for p in backend.propositions(text, title="T", section=None).value if p.startswith("In")]


def test_cells_lose_their_markdown_and_bold_labels_name_the_row(backend) -> None:
    text = ("| **Level** | **Narrow**<br>_clearly scoped task_ |\n|---|---|\n"
            "| **Level 1: Emerging**<br>_somewhat better_ | **Emerging Narrow AI**<br>simple rule-based sys-<br>tems |")
    assert ["In a table of Levels, for Level 1: Emerging, Narrow is Emerging Narrow AI simple "
            "rule-based systems."] == backend.propositions(text, title="Levels", section=None).value


def test_a_word_hyphenated_at_a_cell_line_break_is_rejoined(backend) -> None:
    text = "| Level | Narrow |\n|---|---|\n| Level 1; Emerging | simple rule-based sys- tems, pre- and post-training |"
    assert ["In a table of L, for Level 1, Emerging, Narrow is simple rule-based systems, pre- and "
            "post-training."] == backend.propositions(text, title="L", section=None).value


def test_a_part_of_a_split_table_is_stated_with_its_head(tmp_path: Path, backend) -> None:
    path = write_markdown(tmp_path / "r.md", CAPTION, table(LONG_ROWS))
    _, chunks = table_chunks(path, chunk_size=300)
    last = chunks[-1]
    statements = backend.propositions(last.prompt_text, title="T", section=None).value
    assert ("In Table 2 (BLEU scores of translation models on newstest2014), for Model number 29, "
            "EN-DE is 22.9, EN-FR is 32.9.") == statements[-1]


def test_table_row_propositions_pass_offline_grading(backend) -> None:
    text = f"{CAPTION}\n\n{table(SHORT_ROWS)}"
    propositions = backend.propositions(text, title="T", section=None).value
    grades = backend.grade(text, propositions, title="T", section=None).value
    assert [True] * len(propositions) == [g.passes(Settings().thresholds()) for g in grades]


def test_a_row_statement_points_to_its_row_in_the_document(tmp_path: Path, backend) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(LONG_ROWS), PROSE)
    doc, chunks = table_chunks(path, chunk_size=300)
    found = set()
    for chunk in chunks:
        for statement in backend.propositions(chunk.prompt_text, title="T", section=None).value:
            span = chunk_row_span(chunk, statement)
            if span is not None:
                found.add(doc.text[span[0] : span[1]])
    assert set(LONG_ROWS) == found


def test_a_sentence_points_to_no_row(tmp_path: Path) -> None:
    path = write_markdown(tmp_path / "r.md", PROSE, CAPTION, table(SHORT_ROWS))
    _, [chunk] = table_chunks(path)
    assert None is chunk_row_span(chunk, "BLEU scores of translation models on newstest2014.")


# --- A ruled table in a PDF read by the layout engine ---------------------------------------

PDF_ROWS = [["ByteNet", "23.75", ""], ["ConvS2S", "25.16", "40.46"], ["Transformer (big)", "28.4", "41.8"]]


def make_table_pdf(path: Path) -> Path:
    """A page of prose, a caption, a ruled 3-column table and more prose."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_textbox(pymupdf.Rect(72, 72, 523, 152), PROSE, fontsize=11)
    page.insert_text((72, 172), "Table 1: BLEU scores of three translation models.", fontsize=11)
    top = 184
    for cells in [["Model", "EN-DE", "EN-FR"], *PDF_ROWS]:
        left = 72
        for width, cell in zip([150, 100, 100], cells, strict=True):
            page.draw_rect(pymupdf.Rect(left, top, left + width, top + 20), color=(0, 0, 0), width=0.7)
            page.insert_text((left + 4, top + 14), cell, fontsize=10)
            left += width
        top += 20
    page.insert_textbox(pymupdf.Rect(72, top + 20, 523, top + 100), PROSE, fontsize=11)
    doc.save(path)
    return path


@pytest.fixture(scope="module")
def table_pdf(tmp_path_factory):
    path = make_table_pdf(tmp_path_factory.mktemp("pdf") / "scores.pdf")
    doc = extract_document(path, Settings(pdf_reader="layout"))
    return doc, chunk_document(doc, Settings())


def test_a_pdf_table_is_one_chunk_with_its_caption(table_pdf) -> None:
    doc, chunks = table_pdf
    table_text = [c.text for c in chunks if "|" in c.text]
    assert ["Table 1: BLEU scores of three translation models.\n\n|Model|EN-DE|EN-FR|\n|---|---|---|\n"
            "|ByteNet|23.75||\n|ConvS2S|25.16|40.46|\n|Transformer (big)|28.4|41.8|"] == table_text


def offline_propositions(chunks, title: str, cache: Path):
    """The offline backend's propositions of ``chunks``, per chunk."""
    settings = Settings()
    context = DocumentContext(title=title, summary=f"{title}.")
    with ThreadPoolExecutor(2) as pool:
        return propositions_for_document(
            chunks, context, OfflineBackend(settings), ResultCache(cache), settings, pool)


def test_a_row_statement_carries_the_boxes_of_its_row(table_pdf, tmp_path: Path) -> None:
    doc, chunks = table_pdf
    outcomes = offline_propositions(chunks, "Scores", tmp_path / "cache")
    count = sum(len(o.propositions) for o in outcomes)
    rows = proposition_rows(doc, chunks, outcomes, np.zeros((count, 2)), Settings(), "v", "run")
    [statement] = [r for r in rows if "for Transformer (big)" in r["text"]]
    row_start = doc.text.index("|Transformer (big)|")
    [region] = [r for r in doc.regions if r.start == row_start]
    box = region.box
    assert [{"page": 1, "x0": box.x0, "y0": box.y0, "x1": box.x1, "y1": box.y1}] == statement["boxes"]


# --- A table longer than a chunk in a PDF read by the layout engine ------------------------

ELEMENTS = [["Element", "Symbol", "Atomic number"],
            *[[f"Element {n}", f"E{n}", str(n)] for n in range(1, 25)]]
ELEMENTS_HEAD = ("Table 1: Hardness and density of minerals\n\n|Element|Symbol|Atomic number|\n"
                 "|---|---|---|")


@pytest.fixture(scope="module")
def long_table_pdf(tmp_path_factory):
    path = pdf_factory.make_table_pdf(tmp_path_factory.mktemp("pdf") / "elements.pdf", ELEMENTS)
    doc = extract_document(path, Settings(pdf_reader="layout"))
    chunks = [c for c in chunk_document(doc, Settings(chunk_size=250)) if "|E" in c.text]
    return doc, chunks, path


def test_a_long_pdf_table_is_split_between_rows_each_part_headed(long_table_pdf) -> None:
    _, chunks, _ = long_table_pdf
    rows = [line for c in chunks for line in c.text.split("\n") if line.startswith("|Element ")]
    assert ([""] + [ELEMENTS_HEAD] * (len(chunks) - 1),
            [f"|Element {n}|E{n}|{n}|" for n in range(1, 25)]) == (
        [c.table_head for c in chunks], rows
    )


def test_the_parts_of_a_long_pdf_table_slice_the_stored_text(long_table_pdf) -> None:
    doc, chunks, _ = long_table_pdf
    assert [c.text for c in chunks] == [doc.text[c.char_start:c.char_end] for c in chunks]


def test_the_boxes_of_each_part_lie_on_the_page_and_cover_its_cells(long_table_pdf) -> None:
    doc, chunks, path = long_table_pdf
    outside, uncovered = [], set()
    with pymupdf.open(path) as pdf:
        page = pdf[0]
        for chunk in chunks:
            boxes = [pymupdf.Rect(b.x0, b.y0, b.x1, b.y1)
                     for b in boxes_for_span(doc.regions, chunk.char_start, chunk.char_end)]
            outside += [b for b in boxes if b not in page.rect]
            seen = {w[4] for b in boxes for w in page.get_text("words", clip=b)}
            cells = {word for line in chunk.text.split("\n") if line.startswith("|")
                     for word in line.replace("|", " ").split() if set(word) != {"-"}}
            uncovered |= cells - seen
    assert ([], set()) == (outside, uncovered)


# --- A table continued on the next page -----------------------------------------------------

CONTINUED_CAPTION = "Table 1: Symbols and atomic numbers of the elements"


@pytest.fixture(scope="module")
def continued_table(tmp_path_factory):
    rows = [[f"Element {n}", f"E{n}", str(n)] for n in range(1, 41)]
    path = pdf_factory.make_continued_table_pdf(
        tmp_path_factory.mktemp("pdf") / "continued.pdf", ["Element", "Symbol", "Atomic number"],
        [rows[:25], rows[25:]], CONTINUED_CAPTION)
    doc = extract_document(path, Settings(pdf_reader="layout"))
    return doc, chunk_document(doc, Settings())


def test_a_table_continued_on_the_next_page_has_its_caption_in_the_head(continued_table) -> None:
    _, chunks = continued_table
    [second] = [c for c in chunks if c.page_start == 2]
    assert CONTINUED_CAPTION == second.table_head


def test_offline_propositions_name_a_continued_table_by_its_caption(continued_table,
                                                                     tmp_path: Path) -> None:
    _, chunks = continued_table
    outcomes = offline_propositions(chunks, "Elements", tmp_path / "cache")
    [statement] = [p.text for o in outcomes for p in o.propositions if "Element 30," in p.text]
    assert ("In Table 1 (Symbols and atomic numbers of the elements), for Element 30, Symbol is "
            "E30, Atomic number is 30.") == statement
