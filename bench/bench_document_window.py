"""Documents at once (document_concurrency): wall time and peak memory of whole ingests, side by
side with another checkout (the base commit, which submitted every document at once).

    python bench/bench_document_window.py --base ../docwindow-base [--windows 4 8 16]
        [--rounds 3] [--notes 120] [--latency-ms 0 200] [--pdfs]

(a) ``--notes`` small text notes (three to six sentences of the corpus's Nike report each)
    ingested by `propdex ingest NOTES --db NEW` in a child process, the LLM steps answered by
    the scripted OpenAI-compatible server (a child process) at each latency, embeddings by
    local MiniLM (the default).
(b) ``--pdfs``: the offline ingest of the three corpus PDFs (levels_of_agi,
    attention_is_all_you_need, mck_energy_first_5_pages), nothing cached.
(c) ``--examples``: README's first run, `propdex ingest examples` (offline).

Each round runs every variant once, in turn (the other checkout, then this one with
PROPDEX_DOCUMENT_CONCURRENCY at each window), so that a change of the machine's load hits all
alike; medians over the rounds. Every run has a fresh database, cache and Prefect home. Wall:
the child's whole run as a user sees it (Python's start, Prefect's API, the flow). Peak RSS:
the ingest process's own (not Prefect's API process nor the extraction workers). CPU: user and
system seconds of the child and of the processes it waited for (Prefect's API, extraction
workers), the server excluded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

CORPUS = REPO.parent / "shared" / "corpus"
PDFS = ["levels_of_agi.pdf", "attention_is_all_you_need.pdf", "mck_energy_first_5_pages.pdf"]
SENTENCE_SOURCE = CORPUS / "nike_2023_annual_report.txt"

# `propdex ingest ...` in the child, then its exit code and its own peak RSS.
CHILD = """
import json, resource, sys
from propdex.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_notes(folder: Path, count: int) -> Path:
    """``count`` notes of three to six consecutive sentences, each from its own place."""
    text = SENTENCE_SOURCE.read_text(encoding="utf-8")
    pool = [s for s in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)) if len(s) > 40]
    folder.mkdir(parents=True, exist_ok=True)
    step = len(pool) // count
    for n in range(count):
        body = " ".join(pool[n * step: n * step + 3 + n % 4])
        (folder / f"note{n:03d}.txt").write_text(f"Note {n}\n\n{body}\n", encoding="utf-8")
    return folder


def ingest(checkout: Path, paths: list[str], env: dict[str, str], workdir: Path) -> dict:
    """One `propdex ingest` of ``paths`` with ``checkout``'s code: wall seconds, peak RSS."""
    run_dir = Path(tempfile.mkdtemp(dir=workdir))
    child_env = {**os.environ, **env, "PYTHONPATH": str(checkout),
                 "PREFECT_HOME": str(run_dir / "prefect"),
                 "PROPDEX_CACHE_DIR": str(run_dir / "cache")}
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-c", CHILD, "ingest", *paths, "--db",
                           str(run_dir / "db"), "--json"], cwd=checkout, env=child_env,
                          capture_output=True, text=True, check=False)
    seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
    result = json.loads(done.stdout.strip().splitlines()[-1])
    summary = json.loads(done.stdout[:done.stdout.rindex("\n{")])
    failed = [d["source"] for d in summary["documents"] if d["status"] != "indexed"]
    if result["code"] or failed:
        raise SystemExit(f"{checkout}: ingest failed ({failed}):\n{done.stderr[-3000:]}")
    return {"seconds": seconds, "cpu": cpu, "peak_mib": result["peak_mib"]}


def _children_cpu() -> float:
    """CPU seconds (user and system) of the children waited for so far, and theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def compare(title: str, paths: list[str], env: dict[str, str], base: Path, windows: list[int],
            rounds: int, workdir: Path) -> None:
    variants = [("base", base, {})] + [
        (f"window {n}", REPO, {"PROPDEX_DOCUMENT_CONCURRENCY": str(n)}) for n in windows]
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
    for _ in range(rounds):
        for name, checkout, extra in variants:
            runs[name].append(ingest(checkout, paths, {**env, **extra}, workdir))
    load = os.getloadavg()
    print(f"\n### {title}: {rounds} rounds, load average after {load[0]:.1f} / {load[1]:.1f}\n")
    print("| variant | wall s (median) | each round | / base | CPU s (median) | peak RSS MiB (median) |")
    print("|---|---:|---|---:|---:|---:|")
    base_s = statistics.median(r["seconds"] for r in runs["base"])
    for name, results in runs.items():
        wall = statistics.median(r["seconds"] for r in results)
        each = " / ".join(f"{r['seconds']:.1f}" for r in results)
        cpu = statistics.median(r["cpu"] for r in results)
        rss = statistics.median(r["peak_mib"] for r in results)
        print(f"| {name} | {wall:.1f} | {each} | {wall / base_s:.2f} | {cpu:.1f} | {rss:.0f} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--windows", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--notes", type=int, default=120, help="0 skips (a)")
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 200.0])
    parser.add_argument("--pdfs", action="store_true", help="(b): the three corpus PDFs")
    parser.add_argument("--examples", action="store_true",
                        help="(c): README's first run, `propdex ingest examples`, offline")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="propdex-bench-window-"))
    base = args.base.resolve()
    if args.notes:
        from bench_e2e import llm_environment
        from bench_llm import ServerProcess

        notes = make_notes(workdir / "notes", args.notes)
        for latency in args.latency_ms:
            server = ServerProcess(latency)
            try:
                compare(f"(a) {args.notes} notes, LLM at {latency:g} ms a call", [str(notes)],
                        llm_environment(server.url, "minilm"), base, args.windows,
                        args.rounds, workdir)
            finally:
                server.stop()
    if args.pdfs:
        compare("(b) the three corpus PDFs, offline", [str(CORPUS / pdf) for pdf in PDFS],
                {"PROPDEX_LLM": "offline"}, base, args.windows, args.rounds, workdir)
    if args.examples:
        compare("(c) README's first run: examples/, offline", [str(REPO / "examples")],
                {"PROPDEX_LLM": "offline"}, base, args.windows, args.rounds, workdir)


if __name__ == "__main__":
    main()
