"""Text and Markdown files in any common encoding; only binary content is refused."""

from __future__ import annotations

import codecs
import random
from pathlib import Path

import pytest

from propdex.errors import ExtractionError
from propdex.extract import extract_document
from propdex.extract.encoding import decode_bytes
from propdex.settings import Settings

FRENCH = "Café au lait, crème brûlée et déjà vu: le menu du déjeuner."
RUSSIAN = "Привет, как дела? Это пример текста в кодировке Windows для проверки."
JAPANESE = "日本語のテキストです。これはシフトJISで保存されています。"
POLISH = "Zażółć gęślą jaźń: polski tekst zapisany w kodowaniu Windows."
# The detector needs a few sentences of Greek: on one it takes the bytes for Cyrillic.
GREEK = (
    "Καλημέρα κόσμε, αυτό είναι ελληνικό κείμενο για τον έλεγχο. Η Αθήνα είναι η πρωτεύουσα "
    "της Ελλάδας και μία από τις αρχαιότερες πόλεις του κόσμου. Ο Παρθενώνας βρίσκεται στην "
    "Ακρόπολη."
)


@pytest.mark.parametrize(
    ("data", "text", "encoding"),
    [
        (FRENCH.encode("utf-8"), FRENCH, "utf-8"),
        (codecs.BOM_UTF8 + FRENCH.encode("utf-8"), FRENCH, "utf-8"),
        (codecs.BOM_UTF16_LE + FRENCH.encode("utf-16-le"), FRENCH, "utf-16-le"),
        (codecs.BOM_UTF16_BE + FRENCH.encode("utf-16-be"), FRENCH, "utf-16-be"),
        (codecs.BOM_UTF32_LE + FRENCH.encode("utf-32-le"), FRENCH, "utf-32-le"),
        (FRENCH.encode("utf-16-le"), FRENCH, "utf-16-le"),
        (FRENCH.encode("utf-16-be"), FRENCH, "utf-16-be"),
        (FRENCH.encode("latin-1"), FRENCH, "cp1252"),
        ("Caf\xe9 au lait".encode("latin-1"), "Caf\xe9 au lait", "cp1252"),
        ("“Smart quotes” cost 5 € — said the note.".encode("cp1252"),
         "“Smart quotes” cost 5 € — said the note.", "cp1252"),
        (RUSSIAN.encode("cp1251"), RUSSIAN, "cp1251"),
        (POLISH.encode("cp1250"), POLISH, "cp1250"),
        (GREEK.encode("cp1253"), GREEK, "cp1253"),
        (JAPANESE.encode("shift_jis"), JAPANESE, "cp932"),
    ],
)
def test_encoding_is_detected(data: bytes, text: str, encoding: str) -> None:
    decoded = decode_bytes(data, "menu.txt")
    assert (text, encoding) == (decoded.text, decoded.encoding)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"text with a \x00 NUL byte", "not a text file (binary content: NUL bytes)"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not a text file (binary content: PNG signature)"),
        (b"PK\x03\x04\x14\x00\x00\x00", "not a text file (binary content: ZIP signature)"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "not a text file (binary content: PDF signature)"),
        (codecs.BOM_UTF16_LE + b"\x00\xd8", "not a text file (binary content: invalid utf-16-le)"),
        (random.Random(17).randbytes(4000).replace(b"\x00", b"\x01"),
         "not a text file (binary content: no text encoding fits)"),
    ],
)
def test_binary_content_is_refused_with_its_reason(data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionError) as caught:
        decode_bytes(data, "data.txt")
    assert reason == caught.value.reason


@pytest.mark.parametrize("suffix", [".txt", ".md"])
def test_document_records_the_encoding(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"menu{suffix}"
    path.write_bytes(FRENCH.encode("cp1252"))
    doc = extract_document(path, Settings())
    assert (FRENCH, "cp1252") == (doc.text, doc.encoding)


def test_pdf_has_no_encoding(tmp_path: Path) -> None:
    from tests.pdf_factory import make_pdf

    path = make_pdf(tmp_path / "menu.pdf", [FRENCH])
    assert None is extract_document(path, Settings()).encoding
