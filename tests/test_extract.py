"""Extraction: exact page spans, metadata, outline sections, normalisation and refusals."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pymupdf
import pytest
from pydantic import SecretStr

from propdex import ids
from propdex.errors import (
    DocumentTooLargeError,
    EncryptedDocumentError,
    ExtractionError,
    NoTextLayerError,
    UnsupportedSourceError,
)
from propdex.extract import SUPPORTED_SUFFIXES, extract_document
from propdex.extract.normalise import normalise_pdf_text, tidy_whitespace
from propdex.extract.pdf import PAGE_SEPARATOR, tesseract_available
from propdex.models import PageSpan, SectionHint
from propdex.settings import Settings
from tests.pdf_factory import (
    make_blank_pdf,
    make_pdf,
    make_rtl_pdf,
    pdf_bytes,
    unicode_font,
)

THREE_PAGES = [
    "Alpha page opens the report.\nIt has two lines.",
    "Bravo page holds the middle part.",
    "Charlie page closes the report.",
]


@pytest.fixture
def settings() -> Settings:
    return Settings(pdf_reader="fast")


@pytest.fixture
def three_page_pdf(tmp_path: Path) -> Path:
    return make_pdf(tmp_path / "three.pdf", THREE_PAGES)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def extraction_reason(
    path: Path, settings: Settings, error: type[ExtractionError] = ExtractionError
) -> str:
    with pytest.raises(error) as caught:
        extract_document(path, settings)
    return caught.value.reason


# --- PDF text and page spans ---------------------------------------------------------------


def test_supported_suffixes() -> None:
    assert (".pdf", ".epub", ".xps", ".oxps", ".mobi", ".fb2", ".txt", ".md", ".markdown") == SUPPORTED_SUFFIXES


def test_pdf_page_spans_tile_the_text_between_separators(
    three_page_pdf: Path, settings: Settings
) -> None:
    doc = extract_document(three_page_pdf, settings)
    expected = []
    offset = 0
    for number, page_text in enumerate(THREE_PAGES, start=1):
        expected.append(PageSpan(number, offset, offset + len(page_text)))
        offset += len(page_text) + len(PAGE_SEPARATOR)
    assert expected == doc.pages


def test_pdf_text_is_the_page_texts_joined(three_page_pdf: Path, settings: Settings) -> None:
    doc = extract_document(three_page_pdf, settings)
    assert PAGE_SEPARATOR.join(THREE_PAGES) == doc.text


@pytest.mark.parametrize("index", range(len(THREE_PAGES)))
def test_pdf_page_span_slices_that_page(
    three_page_pdf: Path, settings: Settings, index: int
) -> None:
    doc = extract_document(three_page_pdf, settings)
    span = doc.pages[index]
    assert THREE_PAGES[index] == doc.text[span.start : span.end]


def test_pdf_blank_middle_page_gets_an_empty_span(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(tmp_path / "gap.pdf", ["First page text here.", "", "Third page text here."])
    doc = extract_document(path, settings)
    assert [(1, 0, 21), (2, 23, 23), (3, 25, 46)] == [(p.page, p.start, p.end) for p in doc.pages]


def test_pdf_identity_fields(three_page_pdf: Path, settings: Settings) -> None:
    doc = extract_document(three_page_pdf, settings)
    source = str(three_page_pdf.resolve())
    expected = (
        source,
        ids.doc_id_for(source),
        hashlib.sha256(three_page_pdf.read_bytes()).hexdigest(),
    )
    assert expected == (doc.source, doc.doc_id, doc.content_sha256)


def test_pdf_kind_page_count_and_no_ocr(three_page_pdf: Path, settings: Settings) -> None:
    doc = extract_document(three_page_pdf, settings)
    assert ("pdf", 3, False) == (doc.kind, doc.page_count, doc.ocr)


def test_long_text_wraps_and_keeps_every_word(tmp_path: Path, settings: Settings) -> None:
    words = [f"word{i}" for i in range(400)]
    doc = extract_document(make_pdf(tmp_path / "long.pdf", [" ".join(words)]), settings)
    assert (words, True) == (doc.text.split(), doc.text.count("\n") > 5)


# --- Title and sections -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata_title", "expected"),
    [
        ("Annual Report 2023", "Annual Report 2023"),
        ("  Spaced   Title  ", "Spaced Title"),
        ("Untitled", None),
        ("Microsoft Word - board minutes.docx", None),
        ("scan_0001.pdf", None),
        ("", None),
        ("1234", None),
    ],
)
def test_metadata_title_used_when_it_looks_real(
    tmp_path: Path, settings: Settings, metadata_title: str, expected: str | None
) -> None:
    path = make_pdf(tmp_path / "titled.pdf", ["Body text of the document."], title=metadata_title)
    assert expected == extract_document(path, settings).title_hint


def test_title_falls_back_to_large_heading_on_first_page(
    tmp_path: Path, settings: Settings
) -> None:
    path = make_pdf(
        tmp_path / "heading.pdf",
        ["Body text in the normal size."],
        heading="Quarterly Energy Outlook",
    )
    assert "Quarterly Energy Outlook" == extract_document(path, settings).title_hint


def test_metadata_title_wins_over_heading(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(
        tmp_path / "both.pdf", ["Body text."], title="Metadata Title", heading="Heading On Page"
    )
    assert "Metadata Title" == extract_document(path, settings).title_hint


SECTIONED_PAGES = [
    "Preface words before the first heading.\n1 Introduction\nThe introduction mentions methods.",
    "2 Methods\nWe describe the methods.\n2.1 Data\nThe data section.",
    "Closing remarks only.",
]
SECTIONED_TOC = [[1, "Introduction", 1], [1, "Methods", 2], [2, "Data", 2], [1, "Appendix", 3]]


@pytest.fixture
def sectioned_pdf(tmp_path: Path) -> Path:
    return make_pdf(tmp_path / "sections.pdf", SECTIONED_PAGES, toc=SECTIONED_TOC)


def test_toc_sections_start_at_their_heading_lines(sectioned_pdf: Path, settings: Settings) -> None:
    doc = extract_document(sectioned_pdf, settings)
    text = doc.text
    expected = [
        SectionHint("Introduction", 1, text.index("1 Introduction")),
        SectionHint("Methods", 1, text.index("2 Methods")),
        SectionHint("Data", 2, text.index("2.1 Data")),
        SectionHint("Appendix", 1, doc.pages[2].start),  # not on its page: the page start
    ]
    assert expected == doc.sections


def test_section_heading_found_on_the_page_after_the_outline_page(
    tmp_path: Path, settings: Settings
) -> None:
    # LaTeX outlines often point at the page before the heading.
    pages = ["Opening page without headings.", "Background\nSome background text."]
    path = make_pdf(tmp_path / "offbyone.pdf", pages, toc=[[1, "Background", 1]])
    doc = extract_document(path, settings)
    assert [SectionHint("Background", 1, doc.text.index("Background"))] == doc.sections


def test_section_title_match_ignores_case_and_whitespace(
    tmp_path: Path, settings: Settings
) -> None:
    pages = ["Intro text here.\nRESULTS AND\nDISCUSSION\nWhat we found."]
    path = make_pdf(tmp_path / "case.pdf", pages, toc=[[1, "Results and Discussion", 1]])
    doc = extract_document(path, settings)
    assert [doc.text.index("RESULTS")] == [s.char_start for s in doc.sections]


# --- Normalisation ------------------------------------------------------------------------


def test_ligatures_are_expanded(tmp_path: Path, settings: Settings) -> None:
    path = make_pdf(
        tmp_path / "lig.pdf",
        ["A \ufb01nancial e\ufb00ort, \ufb02ow and o\ufb03ce."],
        font=unicode_font(),
    )
    assert "A financial effort, flow and office." == extract_document(path, settings).text


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("an exam-\nple of it", "an example of it"),
        ("the Human-\nAI pair", "the Human-AI pair"),
        ("from 2019-\n2020 on", "from 2019-2020 on"),
        ("a list\n- item one", "a list\n- item one"),
    ],
)
def test_line_end_hyphens(tmp_path: Path, settings: Settings, written: str, expected: str) -> None:
    lead = "Enough words to count as a text layer.\n"
    path = make_pdf(tmp_path / "hyphen.pdf", [lead + written])
    assert lead + expected == extract_document(path, settings).text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a  b   c", "a b c"),
        ("line one   \nline two", "line one\nline two"),
        ("one\n\n\n\n\ntwo", "one\n\ntwo"),
        ("one\n \n \ntwo", "one\n\ntwo"),
        ("windows\r\nlines\rold mac", "windows\nlines\nold mac"),
        ("nul\x00 and\x07bell", "nul andbell"),
        ("tab\tand\u00a0nbsp\u2009thin", "tab and nbsp thin"),
        ("soft\u00adhyphen zero\u200bwidth", "softhyphen zerowidth"),
        ("  leading kept\n    indented  code", "leading kept\n    indented code"),
        ("\ufeffbom", "bom"),
    ],
)
def test_tidy_whitespace(raw: str, expected: str) -> None:
    assert expected == tidy_whitespace(raw)


def test_pdf_normalisation_dehyphenates_after_trailing_spaces() -> None:
    assert "an example" == normalise_pdf_text("an exam-   \nple")


# --- Encryption ---------------------------------------------------------------------------


@pytest.fixture
def encrypted_pdf(tmp_path: Path) -> Path:
    return make_pdf(tmp_path / "locked.pdf", ["Confidential numbers inside."], password="s3cret")


def test_encrypted_without_password(encrypted_pdf: Path, settings: Settings) -> None:
    reason = extraction_reason(encrypted_pdf, settings, EncryptedDocumentError)
    assert "encrypted: password required" == reason


def test_encrypted_with_wrong_password(encrypted_pdf: Path) -> None:
    settings = Settings(pdf_reader="fast", pdf_password=SecretStr("wrong"))
    reason = extraction_reason(encrypted_pdf, settings, EncryptedDocumentError)
    assert "encrypted: wrong password" == reason


def test_encrypted_with_password(encrypted_pdf: Path) -> None:
    doc = extract_document(encrypted_pdf, Settings(pdf_reader="fast", pdf_password=SecretStr("s3cret")))
    assert "Confidential numbers inside." == doc.text


# --- Broken inputs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty file (0 bytes)"),
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "not a PDF (starts with PNG signature)"),
        (b"\xff\xd8\xff\xe0" + bytes(64), "not a PDF (starts with JPEG signature)"),
        (b"PK\x03\x04" + bytes(64), "not a PDF (starts with ZIP signature)"),
        (b"just some words, no PDF at all\n", "not a PDF (plain text content)"),
        (bytes(range(256)) * 8, "not a PDF (no %PDF header)"),
    ],
)
def test_not_a_pdf(tmp_path: Path, settings: Settings, data: bytes, reason: str) -> None:
    assert reason == extraction_reason(write(tmp_path / "fake.pdf", data), settings)


def test_truncated_pdf(tmp_path: Path, settings: Settings) -> None:
    data = pdf_bytes(["First page of a long report. " * 20, "Second page text. " * 20])
    path = write(tmp_path / "cut.pdf", data[: len(data) // 2])
    assert extraction_reason(path, settings).startswith("truncated PDF")


def test_garbage_after_header(tmp_path: Path, settings: Settings) -> None:
    path = write(tmp_path / "garbage.pdf", b"%PDF-1.7\n" + b"\x13\x37 not objects " * 200)
    assert extraction_reason(path, settings).startswith("corrupt PDF: ")


def test_corrupt_reason_does_not_repeat_the_path(tmp_path: Path, settings: Settings) -> None:
    path = write(tmp_path / "garbage.pdf", b"%PDF-1.7\n" + b"\x13\x37 not objects " * 200)
    assert str(path) not in extraction_reason(path, settings)


def test_blank_pdf_without_ocr_has_no_text_layer(tmp_path: Path, settings: Settings) -> None:
    if tesseract_available():
        pytest.skip("Tesseract is installed: blank pages go to OCR instead")
    path = make_blank_pdf(tmp_path / "blank.pdf")
    assert "no text layer" == extraction_reason(path, settings, NoTextLayerError)


def test_nearly_empty_pdf_counts_as_no_text(tmp_path: Path, settings: Settings) -> None:
    if tesseract_available():
        pytest.skip("Tesseract is installed: such pages go to OCR instead")
    path = make_pdf(tmp_path / "page-numbers.pdf", ["1", "2", "3"])
    assert "no text layer" == extraction_reason(path, settings, NoTextLayerError)


def test_blank_pdf_with_ocr_has_no_text_layer(tmp_path: Path, settings: Settings) -> None:
    if not tesseract_available():
        pytest.skip("Tesseract (tessdata) is not installed: the OCR branch cannot run")
    path = make_blank_pdf(tmp_path / "blank.pdf")
    assert "no text layer (OCR found no text)" == extraction_reason(
        path, settings, NoTextLayerError
    )


def test_scanned_page_is_read_with_ocr(tmp_path: Path, settings: Settings) -> None:
    if not tesseract_available():
        pytest.skip("Tesseract (tessdata) is not installed: the OCR branch cannot run")
    # A "scan": the rendered image of a text page, plus a stamped page number as real text.
    text_pdf = make_pdf(tmp_path / "text.pdf", ["Invoice total forty two euros"], font=None)
    with pymupdf.open(text_pdf) as source:
        rect = source[0].rect
        pixmap = source[0].get_pixmap(dpi=200)
    with pymupdf.open() as scan:
        page = scan.new_page(width=rect.width, height=rect.height)
        page.insert_image(rect, pixmap=pixmap)
        page.insert_text((rect.width / 2, rect.height - 20), "7")
        scan.save(tmp_path / "scan.pdf")
    doc = extract_document(tmp_path / "scan.pdf", settings)
    assert (True, "Invoice total forty two euros 7") == (doc.ocr, " ".join(doc.text.split()))


@pytest.mark.parametrize("reader", ["fast", "layout"])
def test_short_text_pdf_is_a_document(tmp_path: Path, reader: str) -> None:
    # Under MIN_TEXT_CHARS, but a word on a page that is no scan: the document is that text.
    path = make_pdf(tmp_path / "note.pdf", ["Invoice 42 paid."])
    doc = extract_document(path, Settings(pdf_reader=reader))
    assert (False, "Invoice 42 paid.") == (doc.ocr, doc.text.strip())


def test_scan_with_a_stamped_word_is_no_text(tmp_path: Path, settings: Settings) -> None:
    # A blank scanned page (an image over the whole page) stamped "Scan 1": the word is the
    # scanner's, not the document's.
    with pymupdf.open() as scan:
        page = scan.new_page()
        paper = pymupdf.Pixmap(pymupdf.csGRAY, pymupdf.IRect(0, 0, 60, 80), 0)
        paper.clear_with(255)
        page.insert_image(page.rect, pixmap=paper)
        page.insert_text((72, 72), "Scan 1")
        scan.save(tmp_path / "scan.pdf")
    expected = "no text layer (OCR found no text)" if tesseract_available() else "no text layer"
    assert expected == extraction_reason(tmp_path / "scan.pdf", settings, NoTextLayerError)


def test_too_many_pages(three_page_pdf: Path) -> None:
    reason = extraction_reason(three_page_pdf, Settings(max_pages=2), DocumentTooLargeError)
    assert "too large: 3 pages > max_pages 2" == reason


def test_file_too_large(three_page_pdf: Path) -> None:
    reason = extraction_reason(three_page_pdf, Settings(max_file_mb=0.0001), DocumentTooLargeError)
    assert reason.startswith("too large: ") and "max_file_mb 0.0001" in reason


def test_unsupported_suffix(tmp_path: Path, settings: Settings) -> None:
    path = write(tmp_path / "report.docx", b"PK\x03\x04")
    assert "unsupported file type: .docx" == extraction_reason(
        path, settings, UnsupportedSourceError
    )


def test_missing_file(tmp_path: Path, settings: Settings) -> None:
    assert "file not found" == extraction_reason(tmp_path / "absent.pdf", settings)


# --- Text and Markdown --------------------------------------------------------------------


def test_text_file_is_tidied(tmp_path: Path, settings: Settings) -> None:
    path = write(
        tmp_path / "notes.txt", b"\xef\xbb\xbfFirst line  \r\nsecond\tline\r\n\r\n\r\n\r\nlast\r\n"
    )
    assert "First line\nsecond line\n\nlast" == extract_document(path, settings).text


def test_text_file_is_one_page(tmp_path: Path, settings: Settings) -> None:
    doc = extract_document(write(tmp_path / "notes.txt", b"Hello there.\nSecond line."), settings)
    assert ([PageSpan(1, 0, len(doc.text))], 1) == (doc.pages, doc.page_count)


def test_text_file_kind_title_sections(tmp_path: Path, settings: Settings) -> None:
    doc = extract_document(
        write(tmp_path / "notes.txt", b"# Not a heading in .txt\nbody"), settings
    )
    assert ("text", None, []) == (doc.kind, doc.title_hint, doc.sections)


def test_text_file_identity(tmp_path: Path, settings: Settings) -> None:
    data = b"Some text content."
    path = write(tmp_path / "notes.txt", data)
    doc = extract_document(path, settings)
    source = str(path.resolve())
    assert (source, ids.doc_id_for(source), hashlib.sha256(data).hexdigest()) == (
        doc.source,
        doc.doc_id,
        doc.content_sha256,
    )


MARKDOWN = """# Field Guide

Intro paragraph.

## Birds
Text about birds.

```bash
# not a heading inside a fence
```

### Owls ###
Night birds.

Mammals
-------
Text about mammals.
"""


@pytest.mark.parametrize("suffix", [".md", ".markdown"])
def test_markdown_sections(tmp_path: Path, settings: Settings, suffix: str) -> None:
    doc = extract_document(write(tmp_path / f"guide{suffix}", MARKDOWN.encode()), settings)
    text = doc.text
    expected = [
        SectionHint("Field Guide", 1, 0),
        SectionHint("Birds", 2, text.index("## Birds")),
        SectionHint("Owls", 3, text.index("### Owls")),
        SectionHint("Mammals", 2, text.index("Mammals\n---")),
    ]
    assert expected == doc.sections


def test_markdown_title_is_first_h1(tmp_path: Path, settings: Settings) -> None:
    doc = extract_document(write(tmp_path / "guide.md", MARKDOWN.encode()), settings)
    assert ("markdown", "Field Guide") == (doc.kind, doc.title_hint)


def test_markdown_front_matter_is_metadata_not_text(tmp_path: Path, settings: Settings) -> None:
    data = ("---\nteam: birds\n---\n" + MARKDOWN).encode()
    doc = extract_document(write(tmp_path / "guide.md", data), settings)
    assert (MARKDOWN.strip(), SectionHint("Field Guide", 1, 0)) == (doc.text, doc.sections[0])


def test_markdown_with_crlf_keeps_heading_offsets(tmp_path: Path, settings: Settings) -> None:
    data = MARKDOWN.replace("\n", "\r\n").encode()
    doc = extract_document(write(tmp_path / "guide.md", data), settings)
    assert [doc.text.index("## Birds")] == [
        s.char_start for s in doc.sections if s.title == "Birds"
    ]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"text with a \x00 NUL byte", "not a text file (binary content: NUL bytes)"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not a text file (binary content: PNG signature)"),
        (b"  \n\t\r\n  ", "empty document"),
    ],
)
def test_text_file_refused(tmp_path: Path, settings: Settings, data: bytes, reason: str) -> None:
    assert reason == extraction_reason(write(tmp_path / "data.txt", data), settings)


# --- Scripts ------------------------------------------------------------------------------


def test_cjk_text_round_trips(tmp_path: Path, settings: Settings) -> None:
    text = "中文测试文本，第二句话。这是第三句，用来检查抽取。"
    path = make_pdf(tmp_path / "cjk.pdf", [text], font=unicode_font("cjk"))
    assert text == extract_document(path, settings).text


def test_arabic_text_round_trips_in_logical_order(tmp_path: Path, settings: Settings) -> None:
    lines = ["مرحبا بالعالم", "السلام عليكم ورحمة الله"]
    path = make_rtl_pdf(tmp_path / "arabic.pdf", lines, unicode_font("arabic"))
    assert "\n".join(lines) == extract_document(path, settings).text


# --- Reference corpus ---------------------------------------------------------------------


@pytest.fixture
def levels_of_agi(corpus: Path):
    return extract_document(corpus / "levels_of_agi.pdf", Settings(pdf_reader="fast"))


@pytest.mark.corpus
def test_corpus_pdf_page_spans(levels_of_agi) -> None:
    doc = levels_of_agi
    spans = [(p.start, p.end) for p in doc.pages]
    rebuilt = PAGE_SEPARATOR.join(doc.text[start:end] for start, end in spans)
    assert (19, list(range(1, 20)), doc.text) == (
        doc.page_count,
        [p.page for p in doc.pages],
        rebuilt,
    )


@pytest.mark.corpus
def test_corpus_pdf_title(levels_of_agi) -> None:
    assert "Levels of AGI: Operationalizing Progress on the Path to AGI" == levels_of_agi.title_hint


@pytest.mark.corpus
def test_corpus_pdf_sections_start_at_their_headings(levels_of_agi) -> None:
    doc = levels_of_agi
    found = [doc.text[s.char_start :].startswith(s.title) for s in doc.sections]
    assert (11, [True] * 11) == (len(doc.sections), found)
