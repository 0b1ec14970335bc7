"""Write small EPUB, FB2, MOBI and XPS files for tests, built by hand: PyMuPDF reads these
formats but writes none of them.

Each holds a "Tides" heading and the paragraphs of TIDES.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pymupdf

TITLE = "Coastal Tides"
TIDES = [
    "The tide rises twice a day along the Atlantic coast of Brittany.",
    "Neap tides come when the sun and the moon pull at right angles.",
]
_HTML_BODY = "<h1>Tides</h1>" + "".join(f"<p>{escape(p)}</p>" for p in TIDES)


def make_epub(path: Path, body: str = _HTML_BODY) -> Path:
    """An EPUB 2 book of one chapter, whose XHTML body is ``body``."""
    with zipfile.ZipFile(path, "w") as book:
        # The mimetype entry comes first and uncompressed, as readers check it.
        book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip",
                      compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml", (
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile '
            'full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>"))
        book.writestr("OEBPS/content.opf", (
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0" '
            'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f'<dc:title>{TITLE}</dc:title><dc:identifier id="id">tides</dc:identifier>'
            "<dc:language>en</dc:language></metadata><manifest><item id=\"c1\" "
            'href="c1.xhtml" media-type="application/xhtml+xml"/></manifest><spine>'
            '<itemref idref="c1"/></spine></package>'))
        book.writestr("OEBPS/c1.xhtml", (
            '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
            f"<head><title>Tides</title></head><body>{body}</body></html>"))
    return path


def make_fb2(path: Path) -> Path:
    """A FictionBook 2 file: one section with a title."""
    paragraphs = "".join(f"<p>{escape(p)}</p>" for p in TIDES)
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><FictionBook '
        'xmlns="http://www.gribuser.ru/xml/fictionbook/2.0"><description><title-info>'
        f"<book-title>{TITLE}</book-title><lang>en</lang></title-info></description><body>"
        f"<section><title><p>Tides</p></title>{paragraphs}</section></body></FictionBook>",
        encoding="utf-8")
    return path


def make_mobi(path: Path) -> Path:
    """A PalmDOC book (type TEXt, creator REAd), which MuPDF's MOBI reader opens: a Palm
    database whose record 0 is the PalmDOC header and whose other records hold the HTML,
    uncompressed."""
    html = f"<html><body>{_HTML_BODY}</body></html>".encode()
    records = [html[i:i + 4096] for i in range(0, len(html), 4096)]
    # compression 1 (none), text length, record count, record size, encryption 0
    header = struct.pack(">HHIHHHH", 1, 0, len(html), len(records), 4096, 0, 0)
    records = [header, *records]
    database = TITLE.encode().ljust(32, b"\0") + struct.pack(
        ">HHIIIIII4s4sIIH", 0, 0, 0, 0, 0, 0, 0, 0, b"TEXt", b"REAd", 0, 0, len(records))
    offset = len(database) + 8 * len(records) + 2
    entries = b""
    for number, record in enumerate(records):
        entries += struct.pack(">IBBH", offset, 0, 0, number)
        offset += len(record)
    path.write_bytes(database + entries + b"\0\0" + b"".join(records))
    return path


def make_xps(path: Path) -> Path:
    """An XPS package of one fixed page, a Glyphs line per paragraph in an embedded font."""
    lines = [f'<Glyphs FontUri="/Resources/serif.ttf" FontRenderingEmSize="16" OriginX="96" '
             f'OriginY="{120 + 28 * number}" Fill="#FF000000" UnicodeString={quoteattr(text)}/>'
             for number, text in enumerate(["Tides", *TIDES])]
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("[Content_Types].xml", (
            '<?xml version="1.0" encoding="utf-8"?><Types xmlns="http://schemas.openxmlformats'
            '.org/package/2006/content-types"><Default Extension="rels" ContentType="'
            'application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="'
            'fdseq" ContentType="application/vnd.ms-package.xps-fixeddocumentsequence+xml"/>'
            '<Default Extension="fdoc" ContentType="application/vnd.ms-package.xps-fixeddocume'
            'nt+xml"/><Default Extension="fpage" ContentType="application/vnd.ms-package.xps-'
            'fixedpage+xml"/><Default Extension="ttf" ContentType="application/vnd.ms-opentype'
            '"/></Types>'))
        package.writestr("_rels/.rels", (
            '<?xml version="1.0" encoding="utf-8"?><Relationships xmlns="http://schemas.openxm'
            'lformats.org/package/2006/relationships"><Relationship Type="http://schemas.micros'
            'oft.com/xps/2005/06/fixedrepresentation" Target="/FixedDocSeq.fdseq" Id="R0"/>'
            "</Relationships>"))
        package.writestr("FixedDocSeq.fdseq", (
            '<FixedDocumentSequence xmlns="http://schemas.microsoft.com/xps/2005/06">'
            '<DocumentReference Source="/Documents/1/FixedDoc.fdoc"/></FixedDocumentSequence>'))
        package.writestr("Documents/1/FixedDoc.fdoc", (
            '<FixedDocument xmlns="http://schemas.microsoft.com/xps/2005/06"><PageContent '
            'Source="/Documents/1/Pages/1.fpage"/></FixedDocument>'))
        package.writestr("Documents/1/Pages/1.fpage", (
            '<FixedPage xmlns="http://schemas.microsoft.com/xps/2005/06" Width="816" '
            f'Height="1056" xml:lang="en">{"".join(lines)}</FixedPage>'))
        package.writestr("Resources/serif.ttf", pymupdf.Font(language="en").buffer)
    return path


BUILDERS = {".epub": make_epub, ".fb2": make_fb2, ".mobi": make_mobi, ".xps": make_xps}
