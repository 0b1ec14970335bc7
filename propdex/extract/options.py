"""The settings extraction reads, as a plain dataclass.

The isolated extraction worker is sent these instead of ``propdex.settings.Settings``:
unpickling Settings would make every worker import pydantic and pydantic-settings (about
0.3 s of CPU each) before its first page, for five values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from propdex.settings import Settings


@dataclass(frozen=True)
class ExtractionSettings:
    allowed_roots: tuple[str, ...]
    max_file_mb: float
    max_pages: int
    pdf_reader: str
    pdf_password: str | None = field(default=None, repr=False)


def extraction_settings(settings: Settings | ExtractionSettings) -> ExtractionSettings:
    """What extraction reads of ``settings`` (returned as it is when it is that already)."""
    if isinstance(settings, ExtractionSettings):
        return settings
    password = settings.pdf_password.get_secret_value() if settings.pdf_password else None
    return ExtractionSettings(
        allowed_roots=tuple(settings.allowed_roots), max_file_mb=settings.max_file_mb,
        max_pages=settings.max_pages, pdf_reader=settings.pdf_reader, pdf_password=password,
    )
