"""PDF extraction with PyMuPDF: normalised text per page, exact page spans, sections.

Two readers (``Settings.pdf_reader``): "layout" reads each page through PyMuPDF's layout
engine (``propdex.extract.engine``: Markdown headings, lists and tables, page regions); a
page the engine fails on is read as in "fast" mode and listed in ``layout_fallback_pages``.
"fast" reads the plain text lines MuPDF gives (``propdex.extract.layout`` orders two-column
pages, ``propdex.extract.furniture`` drops running headers and footers), about a hundred
times faster, and takes sections from the outline.

Every PyMuPDF failure becomes an ``ExtractionError`` subclass with a short reason; no raw
PyMuPDF exception leaves this module.
"""

from __future__ import annotations

import codecs
import functools
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from propdex.errors import (
    DocumentTooLargeError,
    EncryptedDocumentError,
    ExtractionError,
    NoTextLayerError,
)
from propdex.extract import engine
from propdex.extract.engine import OCR_LANGUAGE
from propdex.extract.furniture import PageLines, find_furniture, page_text
from propdex.extract.layout import page_blocks
from propdex.extract.normalise import expand_ligatures, non_space_length, normalise_pdf_text
from propdex.extract.options import ExtractionSettings
from propdex.extract.signatures import NOT_PDF_SIGNATURES, binary_signature
from propdex.models import PageSpan, SectionHint, TextRegion

PAGE_SEPARATOR = "\n\n"

# Leaving out TEXT_PRESERVE_LIGATURES makes MuPDF expand ligatures (and Arabic presentation
# forms) itself; leaving out TEXT_PRESERVE_WHITESPACE maps tabs and odd spaces to spaces.
# TEXT_DEHYPHENATE is not used: it joins "Human-\nAI" into "HumanAI" and "2019-\n2020" into
# "20192020"; normalise.dehyphenate only drops the hyphen before a lower-case continuation.
TEXT_FLAGS = pymupdf.TEXT_MEDIABOX_CLIP | pymupdf.TEXT_CID_FOR_UNKNOWN_UNICODE

# Below this many non-whitespace characters in the whole document the text may be no more
# than a scan's stamped page numbers or header; see ``_no_usable_text``.
MIN_TEXT_CHARS = 20
# A word of two letters or more: what page numbers and scanner marks lack.
_LETTER_WORD = re.compile(r"[^\W\d_]{2,}")
# A page is a scan when one image covers at least this share of it.
SCAN_IMAGE_SHARE = 0.5
# Below this many non-whitespace characters a page has no text layer of its own and the
# layout reader lets the engine OCR it: a scan carries at most a stamped number or header.
MIN_PAGE_TEXT_CHARS = 100

# PyMuPDF shares one MuPDF context per process and is not thread-safe, while the pipeline
# extracts documents from worker threads; whoever else calls PyMuPDF should hold this lock.
PYMUPDF_LOCK = threading.RLock()

_HEADER_WINDOW = 1024  # the PDF spec tolerates bytes before %PDF- within the first 1 KB
_EOF_WINDOW = 4096

_FILE_NAME_TITLE = re.compile(
    r"^(microsoft (word|powerpoint|excel) - )|\.(pdf|docx?|pptx?|xlsx?|odt|rtf|txt|tex|dvi|indd)$",
    re.IGNORECASE,
)
# "3", "3.2", "A.1", "IV." before a heading title, followed by spaces or on a line of its own.
_HEADING_NUMBER = r"(?:(?:\d+(?:\.\d+)*|[A-Z](?:\.\d+)+|[A-Z]|[IVX]+)\.?(?:[^\S\n]+|[^\S\n]*\n))?"
# The "## " a heading line of the layout reader starts with.
_MARKDOWN_HEADING = r"(?:#{1,6} )?"
_MARKDOWN_HEADING_REQUIRED = r"#{1,6} "
_PLACEHOLDER_TITLES = {"untitled", "untitled document", "title", "unknown", "none", "document"}


@dataclass
class PdfContent:
    text: str
    pages: list[PageSpan]
    title_hint: str | None
    sections: list[SectionHint]
    page_count: int
    ocr: bool
    furniture_removed: int = 0  # running header, footer and page-number lines left out
    reader: str = "fast"
    fallback_pages: list[int] = field(default_factory=list)  # layout: pages read in fast mode
    regions: list[TextRegion] = field(default_factory=list)  # layout: page rectangles


# The other formats PyMuPDF lays out into pages and reads the same way: suffix -> (its
# filetype for pymupdf.open, the name error messages give it).
BOOK_FORMATS = {
    ".epub": ("epub", "EPUB"),
    ".xps": ("xps", "XPS"),
    ".oxps": ("xps", "XPS"),
    ".mobi": ("mobi", "MOBI"),
    ".fb2": ("fb2", "FB2"),
}


def extract_pdf(path: Path, source: str, settings: ExtractionSettings) -> PdfContent:
    """Normalised text, page spans, title hint, sections and OCR flag of one PDF (or one
    document of BOOK_FORMATS, by its suffix)."""
    filetype, label = BOOK_FORMATS.get(path.suffix.lower(), ("pdf", "PDF"))
    if filetype == "pdf":
        _check_signature(path, source)
    with PYMUPDF_LOCK:
        doc = _open(path, source, settings, filetype, label)
        try:
            if settings.pdf_reader == "layout":
                return _read_layout(doc, path, source)
            return _read(doc, path, source)
        finally:
            doc.close()


def _check_signature(path: Path, source: str) -> None:
    with open(path, "rb") as fh:
        head = fh.read(_HEADER_WINDOW)
    if b"%PDF-" in head:
        return
    name = binary_signature(head, NOT_PDF_SIGNATURES)
    if name is not None:
        raise ExtractionError(source, f"not a PDF (starts with {name} signature)")
    try:
        # Incremental: the 1 KB window may end inside a multi-byte character.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        is_text = b"\x00" not in head
    except UnicodeDecodeError:
        is_text = False
    raise ExtractionError(
        source, "not a PDF (plain text content)" if is_text else "not a PDF (no %PDF header)"
    )


def _pymupdf_reason(exc: Exception, path: Path) -> str:
    # PyMuPDF quotes the file path in its messages; the status already names the source.
    message = str(exc).replace(f"'{path}'", "").replace(str(path), "")
    return " ".join(message.split()) or type(exc).__name__


def _open(path: Path, source: str, settings: ExtractionSettings, filetype: str = "pdf",
          label: str = "PDF") -> pymupdf.Document:
    try:
        # An explicit filetype: without it PyMuPDF sniffs the content and opens images as
        # documents.
        doc = pymupdf.open(path, filetype=filetype)
    except Exception as exc:  # PyMuPDF raises FileDataError, RuntimeError and MuPDF errors
        raise ExtractionError(source, f"corrupt {label}: {_pymupdf_reason(exc, path)}") from None
    try:
        _check_opened(doc, path, source, settings)
    except BaseException:
        doc.close()
        raise
    return doc


def _check_opened(doc: pymupdf.Document, path: Path, source: str, settings: ExtractionSettings) -> None:
    if doc.needs_pass:
        password = settings.pdf_password
        if not password:
            raise EncryptedDocumentError(source, "encrypted: password required")
        if not doc.authenticate(password):
            raise EncryptedDocumentError(source, "encrypted: wrong password")
    if doc.is_repaired and not _has_eof_marker(path):
        # MuPDF rebuilt the cross-reference table of a file cut short: whatever it recovered
        # is missing the end of the document, so indexing it would cite partial content.
        raise ExtractionError(source, "truncated PDF (no %%EOF marker, xref had to be rebuilt)")
    if doc.page_count == 0:
        raise ExtractionError(source, f"corrupt {_label(doc)}: no pages")
    if doc.page_count > settings.max_pages:
        raise DocumentTooLargeError(
            source, f"too large: {doc.page_count} pages > max_pages {settings.max_pages}"
        )


def _has_eof_marker(path: Path) -> bool:
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - _EOF_WINDOW))
        return b"%%EOF" in fh.read()


def _read(doc: pymupdf.Document, path: Path, source: str) -> PdfContent:
    layouts: list[PageLines] = []
    title = _metadata_title(doc)
    for index in range(doc.page_count):
        try:
            page = doc.load_page(index)
            # One text page serves the text, the bounding boxes and the title's font sizes.
            textpage = page.get_textpage(flags=TEXT_FLAGS)
            if index == 0 and title is None:
                title = _first_page_title(textpage.extractDICT())
            layouts.append(_page_lines(page, textpage))
        except Exception as exc:  # a damaged page object or content stream
            reason = _pymupdf_reason(exc, path)
            raise ExtractionError(source, f"corrupt {_label(doc)}: page {index + 1}: {reason}") from None
    page_texts, furniture_removed = _page_texts(layouts)

    ocr = False
    if _no_usable_text(doc, page_texts):
        if not tesseract_available():
            raise _no_text(doc, source, ocr=False)
        page_texts, furniture_removed = _page_texts(_ocr_pages(doc, path, source))
        ocr = True
        if _no_usable_text(doc, page_texts):
            raise _no_text(doc, source, ocr=True)

    text, pages = join_pages(page_texts)
    sections = _toc_sections(doc, text, pages)
    return PdfContent(text, pages, title, sections, doc.page_count, ocr, furniture_removed)


def _read_layout(doc: pymupdf.Document, path: Path, source: str) -> PdfContent:
    title = _metadata_title(doc)
    pages: list[engine.PagePieces] = []
    fallback: list[int] = []
    # The engine decides per page whether to OCR (a scanned page among text pages too);
    # on the corpus its text was as complete as reading every page by OCR (bench/RESULTS.md).
    ocr = doc.is_pdf and tesseract_available()
    for index in range(doc.page_count):
        text_page = _text_page(doc, index, path, source)
        if index == 0 and title is None:
            title = _first_page_title(text_page.extractDICT())
        page = _engine_page(doc, index, text_page, ocr)
        if page is None:
            fallback.append(index + 1)
            page = _fast_page(doc, index, path, source)
        pages.append(page)
    lines = [engine.furniture_blocks(page) for page in pages]
    furniture = find_furniture(
        [PageLines(page.height, page.top, blocks) for page, (blocks, _) in zip(pages, lines, strict=True)]
    )
    for page, (_, owners), removed in zip(pages, lines, furniture, strict=True):
        # Each block is one line: its line index is 0.
        engine.drop_furniture(page, {owners[block] for block, _ in removed})
    layout = engine.assemble(pages)
    if _no_usable_text(doc, layout.texts):
        raise _no_text(doc, source, ocr=ocr)
    text, spans = join_pages(layout.texts, layout.continued)
    regions, headings = engine.place(layout, [span.start for span in spans])
    # The outline where the document has one (its author's sections, as in fast mode), the
    # headings the engine found where it has none.
    sections = _toc_sections(doc, text, spans, _MARKDOWN_HEADING) or headings
    return PdfContent(text, spans, title, sections, doc.page_count, any(p.ocr for p in pages),
                      layout.furniture_removed, "layout", fallback, regions)


def _engine_page(doc: pymupdf.Document, index: int, text_page: pymupdf.TextPage,
                 ocr: bool) -> engine.PagePieces | None:
    """The page as the layout engine reads it, or None where it cannot: an error of its
    models or heuristics; no text at all from a page with a text layer of its own.

    The engine reads a page as it is shown (it takes out the page's /Rotate first), and
    finds no paragraphs or table columns in text running sideways: a page whose text runs
    sideways as shown (a landscape table on a portrait page, a page given the wrong /Rotate)
    gets the /Rotate that shows it upright before the engine reads it (in memory only)."""
    upright = upright_rotation(text_page)
    page = doc.load_page(index)
    if doc.is_pdf and upright is not None and upright != page.rotation % 360:
        page.set_rotation(upright)
    try:
        page = engine.read_page(doc, index, ocr and _lacks_text(text_page))
    except Exception:  # the engine's models and heuristics on a page they cannot handle
        return None
    if not any(piece.text.strip() for piece in page.pieces) and not _lacks_text(text_page):
        return None
    return page


# The line directions MuPDF reports (in the page's unrotated space) and the /Rotate that
# shows such a line running left to right.
_UPRIGHT_ROTATION = {(1, 0): 0, (0, -1): 90, (-1, 0): 180, (0, 1): 270}
# A page is turned for the layout engine when this share of its text (by characters) runs
# one way: a figure's labels set sideways (the word grids of attention's pages 14-15, 60% of
# their characters) leave the page as it is shown.
UPRIGHT_SHARE = 0.8


def upright_rotation(text_page: pymupdf.TextPage) -> int | None:
    """The /Rotate under which the page's text (UPRIGHT_SHARE of its characters) reads left
    to right; None when no direction holds that much of it (or there is no text)."""
    weights: dict[int, int] = {}
    total = 0
    for block in text_page.extractDICT()["blocks"]:
        for line in block.get("lines", []):
            chars = sum(len(span["text"].strip()) for span in line["spans"])
            total += chars
            rotation = _UPRIGHT_ROTATION.get(tuple(round(v) for v in line["dir"]))
            if rotation is not None:
                weights[rotation] = weights.get(rotation, 0) + chars
    best = max(weights, key=weights.__getitem__, default=None)
    return best if best is not None and weights[best] >= UPRIGHT_SHARE * total else None


def _lacks_text(text_page: pymupdf.TextPage) -> bool:
    """Whether a page has too little text of its own to be read without OCR (a scan, maybe
    with a stamped page number). A page with a text layer is not OCRed for its pictures:
    Tesseract reads a diagram or a photo as noise ("MEEKedI", "a a | — re") that lands in
    chunks and propositions, while the figure's caption is text already."""
    return non_space_length(normalise_pdf_text(text_page.extractText())) < MIN_PAGE_TEXT_CHARS


def _text_page(doc: pymupdf.Document, index: int, path: Path, source: str) -> pymupdf.TextPage:
    try:
        return doc.load_page(index).get_textpage(flags=TEXT_FLAGS)
    except Exception as exc:  # a damaged page object or content stream
        reason = _pymupdf_reason(exc, path)
        raise ExtractionError(source, f"corrupt {_label(doc)}: page {index + 1}: {reason}") from None


def _no_text(doc: pymupdf.Document, source: str, *, ocr: bool) -> NoTextLayerError:
    """Why a document without text is skipped: a PDF lacks a text layer (a scan, which OCR
    may read); a book (EPUB, FB2, MOBI) simply holds no text, which no scanner fixes."""
    if not doc.is_pdf:
        return NoTextLayerError(source, f"no text: the {_label(doc)} holds none")
    return NoTextLayerError(source, "no text layer (OCR found no text)" if ocr else "no text layer")


def _label(doc: pymupdf.Document) -> str:
    """The document's format as error messages name it: "PDF", "EPUB", "FB2"..."""
    if doc.is_pdf:
        return "PDF"
    name = (doc.metadata or {}).get("format") or "document"
    return {"FictionBook2": "FB2"}.get(name, name)


def _fast_page(doc: pymupdf.Document, index: int, path: Path, source: str) -> engine.PagePieces:
    """A page as fast mode reads it (without the cross-page furniture detection), as one
    piece covering the page."""
    text = normalise_pdf_text(page_text(page_blocks(_text_page(doc, index, path, source)), set()))
    page = doc.load_page(index)
    rect = page.rect * page.derotation_matrix  # in the page's unrotated space, as all boxes
    pieces = [engine.Piece(text, [(0, len(text), tuple(rect))])] if text else []
    return engine.PagePieces(pieces, height=rect.height, top=rect.y0)


def _page_lines(page: pymupdf.Page, textpage: pymupdf.TextPage) -> PageLines:
    return PageLines(height=page.rect.height, top=page.rect.y0, blocks=page_blocks(textpage))


def _page_texts(layouts: list[PageLines]) -> tuple[list[str], int]:
    """Each page's normalised text without its furniture, and how many lines that was.
    Furniture goes before normalisation: a header line never joins the body's first line
    through dehyphenation or whitespace tidying."""
    furniture = find_furniture(layouts)
    texts = [
        normalise_pdf_text(page_text(layout.blocks, removed))
        for layout, removed in zip(layouts, furniture, strict=True)
    ]
    return texts, sum(map(len, furniture))


def join_pages(page_texts: list[str], continued: list[bool] | None = None) -> tuple[str, list[PageSpan]]:
    """Join page texts with PAGE_SEPARATOR, or with a space before a page that goes on with
    the paragraph the page before ends with; each span slices exactly its page's text."""
    pages: list[PageSpan] = []
    parts: list[str] = []
    offset = 0
    for number, text in enumerate(page_texts, start=1):
        if number > 1:
            parts.append(" " if continued and continued[number - 1] else PAGE_SEPARATOR)
            offset += len(parts[-1])
        pages.append(PageSpan(page=number, start=offset, end=offset + len(text)))
        parts.append(text)
        offset += len(text)
    return "".join(parts), pages


def _no_usable_text(doc: pymupdf.Document, page_texts: list[str]) -> bool:
    """Whether the text read is too little to index: under ``MIN_TEXT_CHARS`` and either no
    word in it (page numbers) or from a document with scanned pages (their stamped numbers
    or header). A short born-digital text ("Invoice 42 paid.") is a document."""
    if sum(non_space_length(t) for t in page_texts) >= MIN_TEXT_CHARS:
        return False
    return not any(_LETTER_WORD.search(t) for t in page_texts) or _has_scanned_page(doc)


def _has_scanned_page(doc: pymupdf.Document) -> bool:
    for page in doc:
        area = abs(page.rect)
        if any(abs(pymupdf.Rect(image["bbox"]) & page.rect) >= SCAN_IMAGE_SHARE * area
               for image in page.get_image_info()):
            return True
    return False


@functools.cache
def tesseract_available() -> bool:
    """Whether PyMuPDF can OCR: its built-in Tesseract needs the English language data, found
    through TESSDATA_PREFIX or an installed tesseract (looked up once per process)."""
    try:
        tessdata = pymupdf.get_tessdata()
    except Exception:  # RuntimeError when neither TESSDATA_PREFIX nor tesseract is found
        return False
    return (Path(tessdata) / f"{OCR_LANGUAGE}.traineddata").is_file()


def _ocr_pages(doc: pymupdf.Document, path: Path, source: str) -> list[PageLines]:
    # Every page, not only the empty ones: a scan often carries a stamped page number or
    # header as real text, which is exactly the "tiny text" that sent us here.
    layouts = []
    for index in range(doc.page_count):
        try:
            page = doc.load_page(index)
            textpage = page.get_textpage_ocr(
                flags=TEXT_FLAGS, language=OCR_LANGUAGE, dpi=300, full=True
            )
            layouts.append(_page_lines(page, textpage))
        except Exception as exc:
            reason = _pymupdf_reason(exc, path)
            raise ExtractionError(source, f"OCR failed: page {index + 1}: {reason}") from None
    return layouts


def _metadata_title(doc: pymupdf.Document) -> str | None:
    title = " ".join(((doc.metadata or {}).get("title") or "").split())
    if not title or len(title) > 300 or not any(c.isalpha() for c in title):
        return None
    if title.lower() in _PLACEHOLDER_TITLES or _FILE_NAME_TITLE.search(title):
        return None
    return expand_ligatures(title)


def _first_page_title(page_dict: dict) -> str | None:
    """The run of lines set in the page's largest font, when that font stands out from the
    body text (papers and reports without a metadata title put theirs there)."""
    lines: list[tuple[float, str]] = []
    for block in page_dict.get("blocks", []):
        for line in block.get("lines", []):
            if line["dir"] != (1.0, 0.0):  # skip rotated margin text such as arXiv stamps
                continue
            spans = [s for s in line["spans"] if s["text"].strip()]
            if spans:
                lines.append((max(s["size"] for s in spans), "".join(s["text"] for s in spans)))
    if not lines:
        return None
    weight: dict[float, int] = {}
    for size, text in lines:
        weight[round(size)] = weight.get(round(size), 0) + len(text)
    body_size = max(weight, key=weight.__getitem__)
    largest = max(size for size, _ in lines)
    # A cover page holds nothing but display type, so a large absolute size also counts.
    if largest < body_size * 1.2 and largest < 20:
        return None
    picked: list[str] = []
    for size, text in lines:
        if abs(size - largest) <= 0.5:
            picked.append(text)
        elif picked:
            break
    title = " ".join(" ".join(picked).split())
    if len(title) > 200 or not any(c.isalpha() for c in title):
        return None
    return expand_ligatures(title)


def _toc_sections(doc: pymupdf.Document, text: str, pages: list[PageSpan],
                  heading_prefix: str = "") -> list[SectionHint]:
    try:
        outline = doc.get_toc(simple=True)
    except Exception:  # a damaged outline costs the sections, not the document
        return []
    sections: list[SectionHint] = []
    previous = 0
    for level, raw_title, page_number in outline:
        title = " ".join(expand_ligatures(raw_title).split())
        if not title or not 1 <= page_number <= len(pages):
            continue  # outline entries pointing nowhere carry no position
        span = pages[page_number - 1]
        # Outline entries come in reading order: on a shared page, search after the last one.
        start = previous if span.start <= previous <= span.end else span.start
        previous = _find_heading(text, title, start, pages[page_number - 1 : page_number + 2],
                                 heading_prefix)
        sections.append(SectionHint(title=title, level=level, char_start=previous))
    sections.sort(key=lambda s: s.char_start)  # stable: equal offsets keep outline order
    return sections


def _find_heading(text: str, title: str, start: int, pages: list[PageSpan],
                  heading_prefix: str = "") -> int:
    """Offset of the line holding just ``title`` (case and spacing aside, a number such as
    "3.2" allowed before it): on the outline's page from ``start``, else on one of the next
    pages (LaTeX outlines often point to the page before the heading); ``start`` when no such
    line exists.

    The title inside running text does not count: chunks are cut at section starts, and a
    start in mid-sentence would cut that sentence. The offset is the line start, number
    included, so a chunk beginning with "3.2 Title" belongs to that section.

    With a ``heading_prefix`` (the layout reader's Markdown headings) a heading line is
    looked for first and a bare line only where none matches: a figure's label or a table
    cell can hold just the title too ("Multi-Head Attention" above Figure 2 of the
    Transformer paper, before its section 3.2.2)."""
    words = r"(?i:" + r"\s*".join(re.escape(w) for w in title.split()) + ")"
    for prefix in ([_MARKDOWN_HEADING_REQUIRED, heading_prefix] if heading_prefix else [""]):
        heading_line = re.compile(
            r"(?:^|(?<=\n))[^\S\n]*" + prefix + _HEADING_NUMBER + words + r"[^\S\n]*(?=\n|$)"
        )
        match = heading_line.search(text, start, pages[0].end)
        for later in pages[1:]:
            match = match or heading_line.search(text, later.start, later.end)
        if match:
            return match.start()
    return start
