"""Magic numbers of file formats that are not what a file's suffix claims."""

from __future__ import annotations

# Formats a .pdf may turn out to be. RTF and PostScript are text formats, so they are
# named here but are no reason to refuse a .txt file.
NOT_PDF_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF8", "GIF"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"PK\x03\x04", "ZIP"),
    (b"\xd0\xcf\x11\xe0", "OLE (old Office)"),
    (b"{\\rtf", "RTF"),
    (b"%!PS", "PostScript"),
)

# Binary formats a .txt or .md may turn out to be. Only signatures long or odd enough that
# no plain text starts with them by chance.
BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    *(entry for entry in NOT_PDF_SIGNATURES if entry[1] not in ("RTF", "PostScript")),
    (b"%PDF-", "PDF"),
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"Rar!\x1a\x07", "RAR"),
    (b"\x7fELF", "ELF"),
    (b"SQLite format 3\x00", "SQLite"),
)


def binary_signature(head: bytes, signatures: tuple[tuple[bytes, str], ...]) -> str | None:
    """The name of the format whose signature ``head`` starts with, else None."""
    return next((name for signature, name in signatures if head.startswith(signature)), None)
