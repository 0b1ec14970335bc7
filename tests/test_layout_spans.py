"""Layout-mode text spaced as printed: a subscript or a number split over fonts stays one
word, a footnote mark stays apart from its word."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from propdex.extract import extract_document
from propdex.settings import Settings

PROSE = "The encoder maps an input sequence of symbols to a sequence of continuous values. " * 3


def make_pdf_with_pieces(path: Path, pieces: list[tuple[str, float, float]]) -> Path:
    """A page of prose, then one line written piece by piece: (text, font size, baseline
    shift), each piece starting where the previous one ends in another font than its
    neighbours (as TeX sets d_model: each piece is a span of its own)."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_textbox(pymupdf.Rect(72, 72, 523, 160), PROSE, fontsize=11)
    x = 72.0
    for number, (text, size, shift) in enumerate(pieces):
        font = ("helv", "tiro")[number % 2]
        page.insert_text((x, 200 + shift), text, fontsize=size, fontname=font)
        x += pymupdf.get_text_length(text, fontname=font, fontsize=size)
    page.insert_textbox(pymupdf.Rect(72, 230, 523, 320), PROSE, fontsize=11)
    doc.save(path)
    return path


def layout_line(path: Path) -> str:
    text = extract_document(path, Settings(pdf_reader="layout")).text
    return next(p for p in text.split("\n\n") if "encoder" not in p)


@pytest.mark.parametrize(("pieces", "expected"), [
    ([("All sub-layers produce outputs of dimension d", 11, 0), ("model", 7, 2), (" = 512 here.", 11, 0)],
     "All sub-layers produce outputs of dimension dmodel = 512 here."),
    ([("The optimizer used a rate of 0", 11, 0), (".", 7, 0), ("9 in every run.", 11, 0)],
     "The optimizer used a rate of 0.9 in every run."),
    ([("The products get extremely small gradients", 11, 0), ("4", 7, -4), (". To counteract this effect.", 11, 0)],
     "The products get extremely small gradients 4. To counteract this effect."),
])
def test_spans_are_joined_as_printed(tmp_path: Path, pieces, expected: str) -> None:
    assert expected == layout_line(make_pdf_with_pieces(tmp_path / "p.pdf", pieces))
