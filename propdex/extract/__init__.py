"""Turn one source file into an ExtractedDocument: normalised text with exact page spans.

Dispatches on the file suffix; every failure is an ``ExtractionError`` subclass whose
``reason`` is a short status text ("encrypted: password required", "empty file (0 bytes)").
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from propdex import ids
from propdex.errors import (
    DocumentTooLargeError,
    ExtractionError,
    UnreadableFileError,
    UnsupportedSourceError,
)
from propdex.extract.options import ExtractionSettings, extraction_settings
from propdex.models import ExtractedDocument, PageSpan
from propdex.security import check_allowed

if TYPE_CHECKING:
    from propdex.settings import Settings

# Read by PyMuPDF (in the isolated extraction worker); the others are decoded as text.
PYMUPDF_SUFFIXES = (".pdf", ".epub", ".xps", ".oxps", ".mobi", ".fb2")
SUPPORTED_SUFFIXES = (*PYMUPDF_SUFFIXES, ".txt", ".md", ".markdown")

_T = TypeVar("_T")

__all__ = ["PYMUPDF_SUFFIXES", "SUPPORTED_SUFFIXES", "extract_document"]


def extract_document(path: str | os.PathLike[str],
                     settings: Settings | ExtractionSettings) -> ExtractedDocument:
    settings = extraction_settings(settings)
    source = ids.normalise_source(path)
    # Again at the last moment: the file may have become a symlink since it was discovered.
    check_allowed(source, list(settings.allowed_roots))
    file_path = Path(source)
    suffix = file_path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise UnsupportedSourceError(source, f"unsupported file type: {suffix or '(no suffix)'}")
    size = _file_size(file_path, source)
    if size == 0:
        raise ExtractionError(source, "empty file (0 bytes)")
    if size > settings.max_file_mb * 1024 * 1024:
        raise DocumentTooLargeError(
            source, f"too large: {size / 1024 / 1024:.1f} MB > max_file_mb {settings.max_file_mb:g}"
        )
    doc_id = ids.doc_id_for(source)

    if suffix in PYMUPDF_SUFFIXES:
        # Imported here: PyMuPDF takes most of a second to import and text-only runs skip it.
        from propdex.extract.pdf import extract_pdf

        content_sha256 = _read_or_fail(source, lambda: ids.sha256_file(file_path))
        pdf = _read_or_fail(source, lambda: extract_pdf(file_path, source, settings))
        return ExtractedDocument(
            source=source,
            doc_id=doc_id,
            content_sha256=content_sha256,
            kind=suffix.lstrip(".").replace("oxps", "xps"),
            text=pdf.text,
            pages=pdf.pages,
            title_hint=pdf.title_hint,
            sections=pdf.sections,
            page_count=pdf.page_count,
            ocr=pdf.ocr,
            furniture_removed=pdf.furniture_removed,
            pdf_reader=pdf.reader,
            layout_fallback_pages=pdf.fallback_pages,
            regions=pdf.regions,
        )

    # Imported here: the extraction worker, which reads only PyMuPDF's formats, then starts
    # without Markdown's parser.
    from propdex.extract.text import extract_markdown, extract_plain_text

    data = _read_or_fail(source, file_path.read_bytes)
    kind, content = (
        ("text", extract_plain_text(data, source))
        if suffix == ".txt"
        else ("markdown", extract_markdown(data, source))
    )
    return ExtractedDocument(
        source=source,
        doc_id=doc_id,
        content_sha256=hashlib.sha256(data).hexdigest(),
        kind=kind,
        text=content.text,
        pages=[PageSpan(page=1, start=0, end=len(content.text))],
        title_hint=content.title_hint,
        sections=content.sections,
        page_count=1,
        encoding=content.encoding,
    )


def _file_size(path: Path, source: str) -> int:
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise ExtractionError(source, "file not found") from None
    except OSError as exc:
        raise UnreadableFileError(source, f"cannot read file: {exc.strerror or exc}") from None
    if not path.is_file():
        raise UnreadableFileError(source, "not a regular file")
    return stat.st_size


def _read_or_fail(source: str, read: Callable[[], _T]) -> _T:
    try:
        return read()
    except OSError as exc:
        raise UnreadableFileError(source, f"cannot read file: {exc.strerror or exc}") from None
