"""Semantic sectioning: the LLM's line ranges repaired, titles into chunks and headers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from propdex.chunking import chunk_document
from propdex.extract import extract_document
from propdex.models import DocumentContext, SectionHint
from propdex.pipeline.headers import attach_headers
from propdex.sectioning import section_document
from propdex.sectioning.guards import LineSection, repair_sections
from propdex.sectioning.lines import Lines
from propdex.sectioning.llm import WINDOW_CHARS, llm_sections
from propdex.sectioning.outline import heading_sections
from propdex.settings import Settings
from tests.scripted_fixtures import scripted_settings
from tests.scripted_server import reply

# Ten lines of 300 characters: every section of one line or more is big enough to stand alone.
LINES = Lines.of("\n".join(f"Line {n} " + "x" * 292 for n in range(10)))


def sections(*triples: tuple[str, int, int]) -> list[LineSection]:
    return [LineSection(*t) for t in triples]


@pytest.mark.parametrize(
    ("proposed", "expected", "repair"),
    [
        (sections(("A", 0, 4), ("B", 5, 9)), sections(("A", 0, 4), ("B", 5, 9)), None),
        (sections(("B", 5, 9), ("A", 0, 4)), sections(("A", 0, 4), ("B", 5, 9)), "unordered"),
        (sections(("A", 0, 6), ("B", 4, 9)), sections(("A", 0, 6), ("B", 7, 9)), "overlapping"),
        (sections(("A", 2, 3), ("B", 6, 7)), sections(("A", 0, 5), ("B", 6, 9)), "uncovered lines"),
        (sections(("A", 0, 4), ("B", 5, 40)), sections(("A", 0, 4), ("B", 5, 9)), "out of range"),
        (sections(("A", 0, 4), ("B", 7, 5), ("C", 5, 9)), sections(("A", 0, 4), ("C", 5, 9)),
         "dropped (empty or untitled)"),
        (sections(("A", 0, 4), ("B", 3, 4), ("C", 5, 9)), sections(("A", 0, 4), ("C", 5, 9)), None),
    ],
)
def test_repairs(proposed, expected, repair) -> None:
    repaired, repairs = repair_sections(proposed, 0, 9, LINES)
    assert (expected, True) == (repaired, repair is None or repairs[repair] > 0)


def test_tiny_sections_join_a_neighbour() -> None:
    lines = Lines.of("Intro\n" + "\n".join("Body line with enough words to count. " * 3 for _ in range(8)))
    repaired, repairs = repair_sections(sections(("Title", 0, 0), ("Body", 1, 4), ("Tail", 5, 8)), 0, 8, lines)
    # "Title" (5 characters) joins "Body", which keeps its own title.
    assert (sections(("Body", 0, 4), ("Tail", 5, 8)), 1) == (repaired, repairs["tiny"])


TEXT = "\n".join(
    [f"Cooking line {n}: knead the dough and bake the bread until it is golden brown." for n in range(6)]
    + [f"Stars line {n}: the telescope observed a distant galaxy and measured its light." for n in range(6)]
)


def answer(*items: tuple[str, int, int]) -> str:
    return json.dumps({"sections": [{"title": t, "start_line": s, "end_line": e} for t, s, e in items]})


def test_llm_sections_are_repaired_and_placed(scripted_server, tmp_path: Path) -> None:
    # Unordered and overlapping: repaired to lines 0-5 and 6-11.
    scripted_server.script(reply(answer(("Astronomy", 5, 11), ("Baking bread", 0, 5))), step="sectioning")
    found, _ = llm_sections(TEXT, scripted_settings(scripted_server, db=str(tmp_path / "db")))
    stars = TEXT.index("Stars line 0")
    assert [SectionHint("Baking bread", 1, 0), SectionHint("Astronomy", 1, stars)] == found


def test_long_documents_are_sectioned_in_windows(scripted_server, tmp_path: Path) -> None:
    text = "\n".join(f"Line {n} " + "y" * 90 for n in range(int(WINDOW_CHARS / 100 * 2.5)))
    found, _ = llm_sections(text, scripted_settings(scripted_server, db=str(tmp_path / "db")))
    # The default answer is one section per window: a single section is kept whole.
    assert (3, 3) == (scripted_server.calls("sectioning"), len(found))


def test_a_windows_last_section_is_asked_again_whole(scripted_server, tmp_path: Path) -> None:
    text = "\n".join(f"Line {n} " + "y" * 90 for n in range(int(WINDOW_CHARS / 100 * 1.5)))
    last_line = Lines.of(text).last_within(0, WINDOW_CHARS)
    scripted_server.script(reply(answer(("Head", 0, 99), ("Cut", 100, last_line))), step="sectioning")
    llm_sections(text, scripted_settings(scripted_server, db=str(tmp_path / "db")))
    second = scripted_server.requests[-1].body["messages"][-1]["content"]
    assert (True, False) == ("[100] Line 100 " in second, "[99] " in second)


def test_section_titles_reach_chunks_and_headers(scripted_server, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(TEXT)
    settings = scripted_settings(scripted_server, db=str(tmp_path / "db"), sectioning=True, chunk_size=2000)
    scripted_server.script(reply(answer(("Baking bread", 0, 5), ("Astronomy", 6, 11))), step="sectioning")
    chunks = chunk_document(extract_document(str(path), settings), settings)
    context = DocumentContext(title="Notes", summary="Two topics.")
    headers = [c.header.splitlines()[-1] for c in attach_headers(chunks, context)]
    assert (["Baking bread", "Astronomy"], ["Section: Baking bread", "Section: Astronomy"]) == (
        [c.section for c in chunks], headers)


def test_offline_sectioning_keeps_the_markdown_headings(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nSome text here.\n\n## Details\n\nMore text here.")
    doc = extract_document(str(path), Settings())
    assert doc.sections == section_document(doc, Settings(sectioning=True))[0].sections


def test_offline_sectioning_finds_heading_lines_in_plain_text() -> None:
    body = "This paragraph states several facts about the topic at hand and goes on. " * 4
    text = f"1. INTELLECTUAL PROPERTY\n{body}\n\n2. RISK OF LOSS\n{body}\n\nITEM 7. Management\n{body}"
    titles = [s.title for s in heading_sections(text)]
    assert ["1. INTELLECTUAL PROPERTY", "2. RISK OF LOSS", "ITEM 7. Management"] == titles


def test_offline_sectioning_never_invents_sections() -> None:
    assert [] == heading_sections("just one lowercase paragraph.\nwith a second line.")


def test_counter_is_empty_for_a_clean_answer() -> None:
    assert Counter() == repair_sections(sections(("A", 0, 9)), 0, 9, LINES)[1]
