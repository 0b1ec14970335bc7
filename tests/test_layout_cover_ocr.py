"""A cover page with a little text layer over a picture: OCR adds the picture's words, not
the letters and marks Tesseract reads in a photo."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from propdex.extract import extract_document
from propdex.settings import Settings
from tests.pdf_factory import MARGIN, PAGE_RECT

TITLE = "The State of Coral Reefs 2024"
LOGO = "Northwind Traders"
# The picture: the logo, then single letters and two-letter marks scattered over it, as
# OCR reads a photo; (x, y, text, font size).
PICTURE = [(20, 60, LOGO, 30), (30, 160, "a", 22), (200, 150, "es", 22), (320, 240, "2", 22),
           (90, 260, "re", 22)]


@pytest.fixture
def tesseract() -> None:
    from propdex.extract.pdf import tesseract_available

    if not tesseract_available():
        pytest.skip("Tesseract (tessdata) is not installed: the engine cannot OCR")


def _picture() -> pymupdf.Pixmap:
    with pymupdf.open() as drawing:
        canvas = drawing.new_page(width=400, height=300)
        for x, y, text, size in PICTURE:
            canvas.insert_text((x, y), text, fontsize=size)
        return canvas.get_pixmap(dpi=200)


def _cover_pdf(path: Path) -> Path:
    """A title in type over a picture."""
    with pymupdf.open() as doc:
        page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
        page.insert_text((MARGIN, 120), TITLE, fontsize=24)
        page.insert_image(pymupdf.Rect(MARGIN, 200, MARGIN + 400, 500), pixmap=_picture())
        doc.save(path)
    return path


def test_ocr_of_a_cover_keeps_the_words_and_drops_the_specks(tmp_path: Path, tesseract) -> None:
    doc = extract_document(_cover_pdf(tmp_path / "cover.pdf"), Settings(pdf_reader="layout"))
    assert (True, f"{LOGO}\n\n{TITLE}") == (doc.ocr, doc.text)
