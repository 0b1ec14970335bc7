"""Run every benchmark and add its figures to bench/RESULTS.md with the machine, the versions
and the date.

    python bench/run_all.py [--quick] [--only NAME ...] [--out FILE]

Each benchmark runs as its own process, one after the other (they must not compete for the
CPU), and prints Markdown; this script puts their outputs under one dated section appended at
the end of bench/RESULTS.md, which keeps the history of every figure (``--out FILE`` writes
them to a file of their own instead). ``--quick``
passes smaller sizes and fewer rounds (a smoke run: its figures are not the reference ones).
Needs the reference corpus beside the checkout (../shared/corpus) and the ``local`` and
``bench`` extras.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

# name -> (script, full arguments, quick arguments)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "extraction": ("bench_extraction.py", [], []),
    "llm": ("bench_llm.py", [], ["--concurrency", "8"]),
    # Scripted embeddings: MiniLM on a shared 2-core machine adds minutes of noise per round.
    "e2e": ("bench_e2e.py", ["--embedder", "scripted"],
            ["--embedder", "scripted", "--rounds", "1", "--pages", "40"]),
    "write": ("bench_write.py", [], ["--documents", "10", "--rounds", "1"]),
    "search": ("bench_search.py", [],
               ["--sizes", "10000", "100000", "--queries", "30", "--flat-queries", "10"]),
    "embed": ("bench_embed.py", [], ["--rounds", "1"]),
    "serve": ("bench_serve.py", [],
              ["--sizes", "100000", "--queries", "30", "--cold-runs", "3", "--seconds", "20"]),
}
TITLES = {
    "extraction": "Extraction: pages/s against raw PyMuPDF and pypdf",
    "llm": "LLM stage: calls and tokens per chunk, wall time against its bound",
    "e2e": "End to end: pages/minute, Prefect bookkeeping share, peak memory",
    "write": "LanceDB write throughput",
    "search": "Search: latency and recall at 10k / 100k / 1M propositions",
    "embed": "Local embeddings: ONNX MiniLM against raw sentence-transformers",
    "serve": "Serving: cold CLI, warm HTTP, recall, 32 clients during commits",
}
PACKAGES = ("prefect", "lancedb", "pyarrow", "numpy", "pymupdf", "pypdf", "openai",
            "torch", "sentence-transformers", "onnxruntime", "prefect-dask")


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "-"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> str:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return f"{pages * size / 2**30:.0f} GiB"
    except (ValueError, OSError):
        return "unknown"


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return (done.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty else "")


def machine(quick: bool) -> list[str]:
    """What the figures were measured on and with: date, commit, machine, load, versions."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return [
        "Written by `python bench/run_all.py`" + (" --quick (smoke run)" if quick else "") + ".",
        "Every figure is measured side by side in one run: medians, and ratios between the",
        "sides measured together. Re-run on your machine before comparing absolute numbers.",
        "",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M UTC}",
        f"- commit: {_commit()}",
        f"- machine: {platform.system()} {platform.release()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs ({_cpu_model()}), {_memory_gib()} memory, "
        f"load average {load:.1f} at start",
        f"- python: {platform.python_version()}",
        "- packages: " + ", ".join(f"{p} {_version(p)}" for p in PACKAGES),
        "",
    ]


def demoted(markdown: str) -> str:
    """``markdown`` with every heading one level deeper, to sit inside a dated section."""
    return "\n".join("#" + line if line.startswith("#") else line for line in markdown.split("\n"))


def run(name: str, quick: bool) -> str:
    script, full, fast = BENCHMARKS[name]
    command = [sys.executable, str(BENCH / script), *(fast if quick else full)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    shown = " ".join(["python", f"bench/{script}", *command[2:]])
    body = done.stdout.strip()
    if done.returncode:
        body += f"\n\n**failed (exit {done.returncode}):**\n\n```\n{done.stderr[-2000:]}\n```"
    print(f"{name}: {seconds:.0f} s, exit {done.returncode}", file=sys.stderr, flush=True)
    return f"## {TITLES[name]}\n\n`{shown}` ({seconds:.0f} s)\n\n{body}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS))
    parser.add_argument("--out", type=Path,
                        help="write the figures to this file alone (default: append a dated "
                             "section to bench/RESULTS.md)")
    args = parser.parse_args()
    figures = [run(name, args.quick) for name in args.only or BENCHMARKS]
    if args.out:
        args.out.write_text("\n".join(["# propdex benchmark results", "", *machine(args.quick),
                                       *figures]), encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
        return 0
    results = BENCH / "RESULTS.md"
    section = [f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: `python bench/run_all.py`", "",
               *machine(args.quick), *map(demoted, figures)]
    with results.open("a", encoding="utf-8") as out:
        out.write("\n".join(section))
    print(f"appended to {results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
