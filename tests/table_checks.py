"""Checks shared by the tests of tables read from PDFs by the layout engine."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from propdex.models import ExtractedDocument
from propdex.regions import boxes_for_span


def table_lines(text: str) -> list[str]:
    """The Markdown table rows of ``text``, separator rows left out."""
    return [line for line in text.split("\n") if line.startswith("|") and "---" not in line]


def rows_off_their_boxes(doc: ExtractedDocument, path: Path) -> tuple[list[str], bool]:
    """The words of the table rows that the row's page box (on page 1) does not show, and
    whether every region starting at a row slices exactly one row of the stored text."""
    uncovered = []
    with pymupdf.open(path) as pdf:
        for row in table_lines(doc.text):
            start = doc.text.index(row)
            [box] = boxes_for_span(doc.regions, start, start + len(row))
            printed = pdf[0].get_text("text", clip=pymupdf.Rect(box.x0, box.y0, box.x1, box.y1)
                                      + (-1, -1, 1, 1))
            uncovered += [w for w in row.replace("|", " ").split() if w not in printed]
    return uncovered, all(doc.text[r.start:r.end] in table_lines(doc.text)
                          for r in doc.regions if doc.text[r.start] == "|")
