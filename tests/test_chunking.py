"""Chunking: exact spans from the recursive chunker and the Chunk records of a document."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from propdex import ids
from propdex.chunking import RecursiveChunker, chunk_document, make_chunker
from propdex.extract import extract_document
from propdex.settings import Settings
from tests.pdf_factory import make_pdf

# Hypothesis warns ("Do not use the `random` module inside strategies") when the global random
# state changes while it draws an example. These strategies never use it; other threads of the
# process may, and do under pytest-xdist, where modules run earlier in the same worker leave
# them going (Prefect's service loops jitter their sleeps with the global random, tenacity
# its retry waits). Their draws say nothing about these tests.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning")

# --- Exact spans --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "chunk_size", "overlap", "expected"),
    [
        ("", 50, 0, []),
        (" \n\n\t ", 50, 0, []),
        ("alpha beta", 50, 0, [(0, 10)]),
        ("  alpha beta  \n", 50, 0, [(2, 12)]),
        # paragraphs first
        (
            "one two three four five six seven\n\neight nine ten eleven twelve",
            40,
            0,
            [(0, 33), (35, 63)],
        ),
        # then sentences
        (
            "First sentence here. Second sentence here. Third one is here.",
            45,
            0,
            [(0, 42), (43, 61)],
        ),
        # then words
        ("aaaa bbbb cccc dddd eeee ffff gggg hhhh", 20, 0, [(0, 19), (20, 39)]),
        # overlap moves the start back to a word start within 8 characters
        ("aaaa bbbb cccc dddd eeee ffff gggg hhhh", 20, 8, [(0, 19), (15, 39)]),
    ],
)
def test_exact_spans(
    text: str, chunk_size: int, overlap: int, expected: list[tuple[int, int]]
) -> None:
    assert expected == RecursiveChunker(chunk_size, overlap).split(text)


def test_default_chunk_size_is_800_characters() -> None:
    chunker = make_chunker(Settings())
    assert (800, 0) == (chunker.chunk_size, chunker.overlap)


def test_default_chunks_fill_up_to_800_characters() -> None:
    text = " ".join(f"Sentence number {i} says something short." for i in range(300))
    lengths = [end - start for start, end in RecursiveChunker().split(text)]
    assert (True, True) == (max(lengths) <= 800, min(lengths[:-1]) > 700)


def test_overlap_repeats_the_end_of_the_previous_chunk() -> None:
    text = " ".join(f"w{i:03d}" for i in range(200))  # 5-character words
    spans = RecursiveChunker(100, 20).split(text)
    shared = [prev_end - start for (_, prev_end), (start, _) in pairwise(spans)]
    assert all(0 < n <= 20 for n in shared)


def test_overlap_never_starts_mid_word() -> None:
    text = " ".join(f"w{i:03d}" for i in range(200))
    spans = RecursiveChunker(100, 23).split(text)
    assert all(text[start - 1] == " " for start, _ in spans[1:])


def test_sliver_is_merged_into_a_neighbour() -> None:
    # chonkie alone returns (0, 100), (100, 110) "word end. " and (110, 132): the tail of the
    # over-long first sentence would be a 9-character chunk.
    text = "word " * 21 + "end. Next sentence is here."
    assert [(0, 99), (100, 132)] == RecursiveChunker(100).split(text)


@pytest.mark.parametrize(("chunk_size", "overlap"), [(0, 0), (100, 100), (100, -1)])
def test_invalid_sizes_are_refused(chunk_size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        RecursiveChunker(chunk_size, overlap)


# --- Properties over random text -----------------------------------------------------------

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzÄéß0123456789", min_size=1, max_size=14)
SENTENCES = st.builds(
    lambda words, end: " ".join(words).capitalize() + end,
    st.lists(WORDS, min_size=1, max_size=20),
    st.sampled_from([".", "!", "?", ",", ";", ""]),
)
PARAGRAPHS = st.builds(
    lambda sentences, joiner: joiner.join(sentences),
    st.lists(SENTENCES, min_size=1, max_size=8),
    st.sampled_from([" ", "\n", "  "]),
)
DOCUMENTS = st.builds(
    lambda paragraphs, joiner, lead, tail: lead + joiner.join(paragraphs) + tail,
    st.lists(PARAGRAPHS, min_size=0, max_size=8),
    st.sampled_from(["\n\n", "\n\n\n", "\n \n"]),
    st.sampled_from(["", " ", "\n\n"]),
    st.sampled_from(["", "\n", "  \n"]),
)
# Anything at all, odd whitespace (\x0b, \u3000, \x1c) and words longer than a chunk included.
ANY_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=600) | st.text(
    alphabet="ab \n\t\u3000\x0b.", max_size=600
)
TEXTS = DOCUMENTS | ANY_TEXT


@st.composite
def chunkers(draw) -> RecursiveChunker:
    size = draw(st.integers(min_value=20, max_value=300))
    overlap = draw(st.sampled_from([0, 0, draw(st.integers(min_value=1, max_value=size // 3))]))
    return RecursiveChunker(size, overlap)


@given(TEXTS, chunkers())
def test_spans_slice_trimmed_non_empty_text(text: str, chunker: RecursiveChunker) -> None:
    pieces = [text[start:end] for start, end in chunker.split(text)]
    assert all(piece and piece == piece.strip() for piece in pieces)


@given(TEXTS, chunkers())
def test_spans_are_in_order(text: str, chunker: RecursiveChunker) -> None:
    spans = chunker.split(text)
    starts, ends = [s for s, _ in spans], [e for _, e in spans]
    assert (True, True) == (starts == sorted(set(starts)), ends == sorted(set(ends)))


@given(TEXTS, chunkers())
def test_spans_overlap_at_most_by_overlap(text: str, chunker: RecursiveChunker) -> None:
    spans = chunker.split(text)
    shared = [prev_end - start for (_, prev_end), (start, _) in pairwise(spans)]
    assert all(n <= chunker.overlap for n in shared)


@given(TEXTS, chunkers())
def test_spans_cover_every_non_whitespace_character(text: str, chunker: RecursiveChunker) -> None:
    covered = bytearray(len(text))
    for start, end in chunker.split(text):
        covered[start:end] = b"\x01" * (end - start)
    assert [] == [i for i, c in enumerate(text) if not covered[i] and not c.isspace()]


@given(TEXTS, chunkers())
def test_spans_fit_chunk_size_plus_overlap(text: str, chunker: RecursiveChunker) -> None:
    spans = chunker.split(text)
    assert all(end - start <= chunker.chunk_size + chunker.overlap for start, end in spans)


@given(DOCUMENTS, chunkers())
def test_overlapping_spans_start_at_a_word(text: str, chunker: RecursiveChunker) -> None:
    spans = chunker.split(text)
    starts = [start for (_, prev_end), (start, _) in pairwise(spans) if start < prev_end]
    assert all(text[start - 1].isspace() for start in starts)


# --- Chunk records of a document -----------------------------------------------------------

PAGES = [
    "1 Introduction\n" + "The introduction explains the aim of the study. " * 6,
    "2 Methods\n" + "The methods section lists every step we took. " * 6,
    "More method details continue on this page. " * 6,
]
TOC = [[1, "Introduction", 1], [1, "Methods", 2]]


@pytest.fixture
def document(tmp_path: Path):
    return extract_document(make_pdf(tmp_path / "study.pdf", PAGES, toc=TOC), Settings())


def section_start(doc, title: str) -> int:
    """Where the section begins: its heading line ("2 Methods", or "# 2 Methods" as the
    layout reader writes it)."""
    return next(s.char_start for s in doc.sections if s.title == title)


def page_of(doc, offset: int) -> int:
    return next(p.page for p in doc.pages if p.start <= offset < p.end)


def test_chunk_text_is_the_document_slice(document) -> None:
    chunks = chunk_document(document, Settings(chunk_size=120))
    assert all(c.text == document.text[c.char_start : c.char_end] for c in chunks)


def test_chunk_ids_and_ordinals(document) -> None:
    chunks = chunk_document(document, Settings(chunk_size=120))
    expected = [
        (ids.chunk_id_for(document.doc_id, n, c.char_start, c.char_end), document.doc_id, n)
        for n, c in enumerate(chunks)
    ]
    assert expected == [(c.chunk_id, c.doc_id, c.ordinal) for c in chunks]


def test_chunk_pages_are_those_of_its_first_and_last_characters(document) -> None:
    chunks = chunk_document(document, Settings(chunk_size=120))
    expected = [
        (page_of(document, c.char_start), page_of(document, c.char_end - 1)) for c in chunks
    ]
    assert expected == [(c.page_start, c.page_end) for c in chunks]


def test_chunk_spanning_a_page_break_names_both_pages(tmp_path: Path) -> None:
    pages = ["Short first page of text.", "Short second page of text."]
    doc = extract_document(make_pdf(tmp_path / "two.pdf", pages), Settings())
    chunks = chunk_document(doc, Settings())
    assert [(1, 2)] == [(c.page_start, c.page_end) for c in chunks]


def test_chunk_sections_follow_the_outline(document) -> None:
    chunks = chunk_document(document, Settings(chunk_size=120))
    methods_start = section_start(document, "Methods")
    expected = ["Introduction" if c.char_start < methods_start else "Methods" for c in chunks]
    assert expected == [c.section for c in chunks]


def test_chunks_do_not_straddle_a_section_start(document) -> None:
    methods_start = section_start(document, "Methods")
    chunks = chunk_document(document, Settings())  # 800 characters would reach across
    assert [] == [c for c in chunks if c.char_start < methods_start < c.char_end]


def test_chunks_cover_every_section(document) -> None:
    chunks = chunk_document(document, Settings())
    assert ["Introduction", "Methods"] == sorted({c.section for c in chunks})


def test_chunk_headers_start_empty(document) -> None:
    assert {""} == {c.header for c in chunk_document(document, Settings(chunk_size=120))}
