"""EPUB, XPS, MOBI and FB2: walked like PDFs and read through the same path (the layout
engine by default, in the isolated extraction worker)."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from propdex.errors import ExtractionError, NoTextLayerError
from propdex.extract import extract_document
from propdex.extract.isolated import extract_isolated
from propdex.regions import boxes_for_span
from propdex.settings import Settings
from propdex.sources import discover
from tests.book_factory import BUILDERS, TIDES, make_epub

FORMATS = sorted(BUILDERS)
LAYOUT_TEXT = "# Tides\n\n" + " ".join(TIDES)


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("books")
    return {suffix: build(folder / f"tides{suffix}") for suffix, build in BUILDERS.items()}


@pytest.mark.parametrize("suffix", FORMATS)
def test_book_is_read_through_the_layout_engine(books, suffix: str) -> None:
    doc = extract_document(books[suffix], Settings())
    assert (LAYOUT_TEXT, suffix.lstrip("."), "layout", ["Tides"]) == (
        doc.text, doc.kind, doc.pdf_reader, [s.title for s in doc.sections]
    )


@pytest.mark.parametrize("suffix", FORMATS)
def test_book_text_has_boxes_within_its_page(books, suffix: str) -> None:
    doc = extract_document(books[suffix], Settings())
    with pymupdf.open(books[suffix]) as book:
        page = book[0].rect
    boxes = boxes_for_span(doc.regions, 0, len(doc.text))
    assert (2, True) == (len(boxes), all(
        b.page == 1 and pymupdf.Rect(b.x0, b.y0, b.x1, b.y1) in page for b in boxes))


@pytest.mark.parametrize("suffix", FORMATS)
def test_book_is_read_in_fast_mode_too(books, suffix: str) -> None:
    doc = extract_document(books[suffix], Settings(pdf_reader="fast"))
    assert (["Tides", *TIDES], "fast") == (doc.text.replace("right\nangles", "right angles")
                                           .split("\n"), doc.pdf_reader)


def test_books_are_found_in_a_folder(books) -> None:
    folder = books[".epub"].parent
    assert sorted(str(p) for p in books.values()) == discover([str(folder)]).files


def test_book_is_extracted_in_the_isolated_worker(books) -> None:
    assert LAYOUT_TEXT == extract_isolated(books[".epub"], Settings()).text


def test_damaged_epub_is_refused_with_its_format(tmp_path: Path) -> None:
    path = tmp_path / "broken.epub"
    path.write_bytes(b"PK\x03\x04 not really a zip archive")
    with pytest.raises(ExtractionError) as failure:
        extract_document(path, Settings())
    assert failure.value.reason.startswith("corrupt EPUB: ")


@pytest.mark.parametrize("reader", ["layout", "fast"])
def test_epub_without_text_is_skipped_as_a_book_not_a_scan(tmp_path: Path, reader: str) -> None:
    # "no text layer" sends the user to install Tesseract, which cannot help a book.
    path = make_epub(tmp_path / "empty.epub", body="")
    with pytest.raises(NoTextLayerError) as failure:
        extract_document(path, Settings(pdf_reader=reader))
    assert "no text: the EPUB holds none" == failure.value.reason
