"""Extraction speed: propdex's extract_document against raw PyMuPDF text extraction.

    python bench/bench_extraction.py [PDF ...]

Raw means open + ``page.get_text()`` for every page. Both sides run alternately, ROUNDS
times per PDF, so machine noise hits them alike; the table gives median pages/s and the
ratio ours/raw.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pymupdf

# Run as a script from a checkout: make the repository's propdex importable without install.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from propdex.extract import extract_document  # noqa: E402
from propdex.settings import Settings  # noqa: E402

ROUNDS = 7
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
DEFAULT_PDFS = (
    "levels_of_agi.pdf",
    "attention_is_all_you_need.pdf",
    "mck_energy_first_5_pages.pdf",
)


def raw_pymupdf(path: Path) -> int:
    with pymupdf.open(path) as doc:
        for page in doc:
            page.get_text()
        return doc.page_count


def ours(path: Path, settings: Settings) -> int:
    return extract_document(path, settings).page_count


def timed(run) -> tuple[float, int]:
    start = time.perf_counter()
    pages = run()
    return time.perf_counter() - start, pages


def bench(path: Path, settings: Settings) -> tuple[int, float, float]:
    """Page count and median seconds (raw, ours) after one warm-up of each."""
    raw_pymupdf(path)
    ours(path, settings)
    raw_times, our_times = [], []
    pages = 0
    for _ in range(ROUNDS):
        seconds, pages = timed(lambda: raw_pymupdf(path))
        raw_times.append(seconds)
        seconds, _ = timed(lambda: ours(path, settings))
        our_times.append(seconds)
    return pages, statistics.median(raw_times), statistics.median(our_times)


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [CORPUS / name for name in DEFAULT_PDFS]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    settings = Settings()
    print(f"{ROUNDS} rounds each, alternating; pymupdf {pymupdf.VersionBind}\n")
    print("| PDF | pages | raw pages/s | ours pages/s | ours/raw |")
    print("|---|---:|---:|---:|---:|")
    total_pages, total_raw, total_ours = 0, 0.0, 0.0
    for path in paths:
        pages, raw_s, our_s = bench(path, settings)
        total_pages += pages
        total_raw += raw_s
        total_ours += our_s
        ratio = raw_s / our_s
        print(
            f"| {path.name} | {pages} | {pages / raw_s:.0f} | {pages / our_s:.0f} | {ratio:.2f} |"
        )
    print(
        f"| **total** | {total_pages} | {total_pages / total_raw:.0f} | "
        f"{total_pages / total_ours:.0f} | {total_raw / total_ours:.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
