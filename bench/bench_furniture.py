"""Page furniture on the reference PDFs: lines removed, and chunks carrying them.

    python bench/bench_furniture.py [--corpus DIR]

For every PDF of the corpus (../shared/corpus by default): the running header, footer and
page-number lines propdex leaves out of the document text, and how many chunks (the
default chunker and settings, per section as the pipeline cuts them) contain one of the
running lines that hold a letter (bare page numbers would match any digit) before and
after. "Before" is the previous extraction: every page's raw PyMuPDF text, normalised,
with furniture kept; the removed lines are what it has and the new text has not.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pymupdf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from propdex.chunking import chunk_document  # noqa: E402
from propdex.extract import extract_document  # noqa: E402
from propdex.extract.normalise import normalise_pdf_text  # noqa: E402
from propdex.extract.pdf import TEXT_FLAGS, _toc_sections, join_pages  # noqa: E402
from propdex.models import ExtractedDocument  # noqa: E402
from propdex.settings import Settings  # noqa: E402


def previous_extraction(path: Path, current: ExtractedDocument) -> ExtractedDocument:
    """The document as extracted before furniture removal (raw page text, normalised)."""
    with pymupdf.open(path) as pdf:
        texts = [normalise_pdf_text(page.get_text("text", flags=TEXT_FLAGS)) for page in pdf]
        text, pages = join_pages(texts)
        sections = _toc_sections(pdf, text, pages)
    return replace(current, text=text, pages=pages, sections=sections, furniture_removed=0)


def removed_lines(before: str, after: str) -> Counter[str]:
    return Counter(before.split("\n")) - Counter(after.split("\n"))


def chunks_with(doc: ExtractedDocument, lines: set[str], settings: Settings) -> tuple[int, int]:
    chunks = chunk_document(doc, settings)
    return sum(any(line in c.text for line in lines) for c in chunks), len(chunks)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    args = parser.parse_args(argv)
    pdfs = sorted(args.corpus.glob("*.pdf"))
    if not pdfs:
        print(f"no PDFs in {args.corpus}", file=sys.stderr)
        return 2
    settings = Settings()
    print("| PDF | pages | lines removed | running lines (with a letter) | chunks with one, "
          "before | after |")
    print("|---|---:|---:|---|---:|---:|")
    for path in pdfs:
        after = extract_document(path, settings)
        before = previous_extraction(path, after)
        removed = removed_lines(before.text, after.text)
        running = {line for line in removed if any(c.isalpha() for c in line)}
        hit_before, total_before = chunks_with(before, running, settings)
        hit_after, total_after = chunks_with(after, running, settings)
        shown = "; ".join(f"{line!r} x{removed[line]}" for line in sorted(running)) or "-"
        print(f"| {path.name} | {after.page_count} | {after.furniture_removed} | {shown} | "
              f"{hit_before} of {total_before} | {hit_after} of {total_after} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
