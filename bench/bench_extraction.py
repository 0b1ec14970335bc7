"""Extraction speed: propdex's extract_document against raw PyMuPDF and against pypdf, or
(``--engine``) propdex's layout reader against the layout engine's own ``to_markdown``.

    python bench/bench_extraction.py [--rounds N] [--wall] [--reader layout|fast] [PDF ...]
    python bench/bench_extraction.py --engine [--rounds N] [--wall] [PDF ...]

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


def engine_markdown(path: Path) -> int:
    """The layout engine's own reading: ``pymupdf4llm.to_markdown`` page by page, with its
    default options (OCR where Tesseract is installed, as the layout reader)."""
    import pymupdf4llm

    with pymupdf.open(path) as doc:
        pymupdf4llm.to_markdown(doc, page_chunks=True)
        return doc.page_count


def engine_bench(path: Path, settings: Settings, rounds: int, clock=time.process_time,
                 ) -> tuple[int, float, float]:
    """Page count and median seconds (engine to_markdown, ours), alternating."""
    engine_markdown(path)
    ours(path, settings)
    engine_times, our_times = [], []
    pages = 0
    for _ in range(rounds):
        seconds, pages = timed(lambda: engine_markdown(path), clock)
        engine_times.append(seconds)
        seconds, _ = timed(lambda: ours(path, settings), clock)
        our_times.append(seconds)
    return pages, statistics.median(engine_times), statistics.median(our_times)


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
    parser.add_argument("--reader", choices=["layout", "fast"], default="fast",
                        help="propdex's PDF reader against raw PyMuPDF and pypdf (default fast)")
    parser.add_argument("--engine", action="store_true",
                        help="the layout reader against the layout engine's own to_markdown")
    args = parser.parse_args(argv)
    clock = time.perf_counter if args.wall else time.process_time
    paths = args.pdfs or [CORPUS / name for name in DEFAULT_PDFS]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.engine:
        return compare_engine(paths, args.rounds, clock, args.wall)
    settings = Settings(pdf_reader=args.reader)
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


def compare_engine(paths: list[Path], rounds: int, clock, wall: bool) -> int:
    settings = Settings(pdf_reader="layout")
    print(f"{rounds} rounds each, alternating, {'wall-clock' if wall else 'CPU'} time; "
          f"pymupdf4llm {_version('pymupdf4llm')}\n")
    print("| PDF | pages | engine to_markdown pages/min | propdex layout pages/min | "
          "propdex/engine |")
    print("|---|---:|---:|---:|---:|")
    total_pages, total_engine, total_ours = 0, 0.0, 0.0
    for path in paths:
        pages, engine_s, our_s = engine_bench(path, settings, rounds, clock)
        total_pages += pages
        total_engine += engine_s
        total_ours += our_s
        print(f"| {path.name} | {pages} | {60 * pages / engine_s:.0f} | "
              f"{60 * pages / our_s:.0f} | {engine_s / our_s:.2f} |")
    print(f"| **total** | {total_pages} | {60 * total_pages / total_engine:.0f} | "
          f"{60 * total_pages / total_ours:.0f} | {total_engine / total_ours:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
