"""Chunks and OCR of PDFs read through the layout engine, on PDFs built with PyMuPDF."""

from __future__ import annotations

from pathlib import Path

import pytest

from propdex.chunking import chunk_document
from propdex.chunking.sentences import sentence_spans
from propdex.extract import extract_document
from propdex.settings import Settings
from tests.pdf_factory import make_pdf

LAYOUT = Settings(pdf_reader="layout")
FAST = Settings(pdf_reader="fast")

# Three paragraphs of four sentences, each about 450 characters: two never fit one chunk.
PARAGRAPHS = [
    " ".join(f"Paragraph {p} sentence {s} tells how the {topic} of the valley changed over "
             "the last hundred years of records." for s in range(1, 5))
    for p, topic in ((1, "rivers"), (2, "forests"), (3, "villages"))
]


@pytest.fixture(scope="module")
def paragraphs_pdf(tmp_path_factory) -> Path:
    return make_pdf(tmp_path_factory.mktemp("chunks") / "valley.pdf", ["\n\n".join(PARAGRAPHS)])


def test_layout_chunks_are_the_chunks_of_the_same_text_as_markdown(paragraphs_pdf: Path,
                                                                    tmp_path: Path) -> None:
    # Whole paragraphs, as a Markdown file of the same paragraphs is chunked: one reader's
    # text is not packed differently from another's.
    markdown = tmp_path / "valley.md"
    markdown.write_text("\n\n".join(PARAGRAPHS) + "\n", encoding="utf-8")
    chunks = chunk_document(extract_document(paragraphs_pdf, LAYOUT), LAYOUT)
    expected = chunk_document(extract_document(markdown, LAYOUT), LAYOUT)
    assert [c.text for c in expected] == [c.text for c in chunks]


def test_layout_chunks_keep_paragraphs_whole(paragraphs_pdf: Path) -> None:
    chunks = chunk_document(extract_document(paragraphs_pdf, LAYOUT), LAYOUT)
    assert PARAGRAPHS == [c.text for c in chunks]


def test_layout_chunks_slice_the_text_and_keep_within_the_chunk_size(paragraphs_pdf: Path) -> None:
    doc = extract_document(paragraphs_pdf, LAYOUT)
    chunks = chunk_document(doc, LAYOUT)
    assert [(doc.text[c.char_start:c.char_end], True) for c in chunks] == [
        (c.text, len(c.text) <= LAYOUT.chunk_size) for c in chunks]


def test_fast_mode_chunks_are_cut_by_lines_as_before(paragraphs_pdf: Path) -> None:
    # Fast mode's text wraps every line: the chunker packs lines, not sentences.
    doc = extract_document(paragraphs_pdf, FAST)
    chunks = chunk_document(doc, FAST)
    assert [False, True] == [c.text.endswith("records.") for c in chunks]


def test_a_sentence_cut_by_a_page_break_is_one_sentence(tmp_path: Path) -> None:
    start = ("The survey team dived on the outer reef every morning of the season, and on the "
             "last day of the season the divers counted the coral colonies")
    rest = "of the outer reef one by one. The counts showed a slow recovery."
    doc = extract_document(make_pdf(tmp_path / "reef.pdf", [start, rest]), LAYOUT)
    assert [f"{start}\n\nof the outer reef one by one.", "The counts showed a slow recovery."] == [
        doc.text[s:e] for s, e in sentence_spans(doc.text)]
