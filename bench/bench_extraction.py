"""Extraction speed: propdex's extract_document against raw PyMuPDF and against pypdf.

    python bench/bench_extraction.py [--rounds N] [--wall] [PDF ...]

Raw means open + ``page.get_text()`` for every page; pypdf (the usual pure-Python
alternative, from the ``bench`` extra) means open + ``page.extract_text()`` for every page.
All sides run alternately, ROUNDS times per PDF, so machine noise hits them alike; the table
gives median pages/s and the ratios ours/raw and ours/pypdf. Times are the CPU seconds of
this process (every side is single-threaded and runs in it): on a shared machine wall time
swings with the others' load, by +-30% between identical runs. ``--wall`` times wall-clock
seconds instead.
"""

from __future__ import annotations

import argparse
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


def pypdf_text(path: Path) -> int:
    try:
        from pypdf import PdfReader
    except ImportError as exc:  # optional dependency
        raise SystemExit(
            "the pypdf column needs the 'bench' extra: pip install 'propdex[bench]'"
        ) from exc
    reader = PdfReader(path)
    for page in reader.pages:
        page.extract_text()
    return len(reader.pages)


def ours(path: Path, settings: Settings) -> int:
    return extract_document(path, settings).page_count


def timed(run, clock) -> tuple[float, int]:
    start = clock()
    pages = run()
    return clock() - start, pages


def bench(path: Path, settings: Settings, rounds: int, clock=time.process_time,
          ) -> tuple[int, float, float, float]:
    """Page count and median seconds (raw, pypdf, ours) after one warm-up of each."""
    raw_pymupdf(path)
    pypdf_text(path)
    ours(path, settings)
    raw_times, pypdf_times, our_times = [], [], []
    pages = 0
    for _ in range(rounds):
        seconds, pages = timed(lambda: raw_pymupdf(path), clock)
        raw_times.append(seconds)
        seconds, _ = timed(lambda: pypdf_text(path), clock)
        pypdf_times.append(seconds)
        seconds, _ = timed(lambda: ours(path, settings), clock)
        our_times.append(seconds)
    return (pages, statistics.median(raw_times), statistics.median(pypdf_times),
            statistics.median(our_times))


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Extraction speed against raw PyMuPDF and pypdf")
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    args = parser.parse_args(argv)
    clock = time.perf_counter if args.wall else time.process_time
    paths = args.pdfs or [CORPUS / name for name in DEFAULT_PDFS]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    settings = Settings()
    print(f"{args.rounds} rounds each, alternating, {'wall-clock' if args.wall else 'CPU'} time; pymupdf {pymupdf.VersionBind}, "
          f"pypdf {_version('pypdf')}\n")
    print("| PDF | pages | raw PyMuPDF pages/s | pypdf pages/s | ours pages/s | ours/raw "
          "| ours/pypdf |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total_pages, total_raw, total_pypdf, total_ours = 0, 0.0, 0.0, 0.0
    for path in paths:
        pages, raw_s, pypdf_s, our_s = bench(path, settings, args.rounds, clock)
        total_pages += pages
        total_raw += raw_s
        total_pypdf += pypdf_s
        total_ours += our_s
        print(
            f"| {path.name} | {pages} | {pages / raw_s:.0f} | {pages / pypdf_s:.0f} | "
            f"{pages / our_s:.0f} | {raw_s / our_s:.2f} | {pypdf_s / our_s:.2f} |"
        )
    print(
        f"| **total** | {total_pages} | {total_pages / total_raw:.0f} | "
        f"{total_pages / total_pypdf:.0f} | {total_pages / total_ours:.0f} | "
        f"{total_raw / total_ours:.2f} | {total_pypdf / total_ours:.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
