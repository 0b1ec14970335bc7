"""End-to-end seconds per page of the offline pipeline (rule-based backend, local MiniLM),
with the breakdown by stage.

Each round ingests the PDFs into a fresh database through the ingest flow, in this process, so
Prefect's start-up and the model load happen once, before the first timed round (both are
reported separately). Stage seconds are summed over documents (documents run concurrently, so
their sum can exceed the wall time); the table gives medians over the rounds.

With --baseline REV the measurement runs in fresh processes, alternating round by round
between a copy of that git revision and this checkout (each process: start-up, then one timed
round), and the table compares the two side by side, with each process's peak RSS and the
largest peak RSS of its extraction worker processes. With --readers as well, this checkout runs
twice per round, with the fast and with the layout PDF reader (PROPDEX_PDF_READER).

Run from the repository root:
    python bench/bench_offline.py [--rounds 3] [--baseline REV [--readers]] [PDF ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_PDFS = ("levels_of_agi.pdf", "attention_is_all_you_need.pdf", "mck_energy_first_5_pages.pdf")


def _environment() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["PROPDEX_LLM"] = "offline"


def warm_up(work: Path) -> tuple[float, float]:
    """Seconds to start Prefect (one empty flow run) and to load the embedding model."""
    from prefect import flow

    from propdex.runtime import embedder_for
    from propdex.settings import Settings

    @flow
    def empty() -> int:
        return 1

    started = time.perf_counter()
    empty()
    prefect_start = time.perf_counter() - started
    started = time.perf_counter()
    embedder_for(Settings(db=str(work / "warm-db"))).embed(["warm up"])
    return prefect_start, time.perf_counter() - started


def measure(pdfs: list[Path], rounds: int) -> dict:
    """Warm up, then ``rounds`` timed ingests of ``pdfs`` into fresh databases."""
    from flows.ingest import ingest
    from propdex.store import Index

    with tempfile.TemporaryDirectory(prefix="propdex-bench-offline-") as tmp:
        work = Path(tmp)
        prefect_start, model_load = warm_up(work)
        walls, per_stage = [], {}
        for n in range(rounds):
            started = time.perf_counter()
            summary = ingest(sources=[str(p) for p in pdfs], db=str(work / f"db{n}"))
            walls.append(time.perf_counter() - started)
            if summary["failed"]:
                raise SystemExit(f"documents failed: {summary['documents']}")
            for stage, seconds in summary["stage_seconds"].items():
                per_stage.setdefault(stage, []).append(seconds)
        pages = sum(d["page_count"] for d in Index.open(str(work / "db0"), create=False).documents())
    return {"walls": walls, "per_stage": per_stage, "pages": pages, "totals": summary["totals"],
            "prefect_start": prefect_start, "model_load": model_load,
            "worker_peak_mib": _workers_peak_mib()}


def _workers_peak_mib() -> float:
    """The largest peak RSS of the extraction worker processes (stopped here, so that the
    kernel reports them among the waited-for children; 0 before workers existed)."""
    import resource

    try:
        from propdex.extract.isolated import stop_workers
    except ImportError:  # a revision without isolated extraction
        return 0.0
    stop_workers()
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def print_single(result: dict, pdfs: list[Path], rounds: int) -> None:
    wall, pages, totals = statistics.median(result["walls"]), result["pages"], result["totals"]
    print(f"offline pipeline on {len(pdfs)} PDFs, {pages} pages, {int(totals['chunks'])} chunks, "
          f"{int(totals['propositions_kept'])} propositions kept / "
          f"{int(totals['propositions_rejected'])} rejected; {rounds} rounds")
    print(f"once per process: Prefect start {result['prefect_start']:.1f} s, "
          f"model load {result['model_load']:.1f} s\n")
    print("| measure | median |")
    print("|---|---:|")
    print(f"| wall time of a run (s) | {wall:.2f} |")
    print(f"| seconds per page | {wall / pages:.3f} |")
    print(f"| pages per minute | {60 * pages / wall:.0f} |")
    print("\n| stage (summed over documents) | seconds | share of stage time |")
    print("|---|---:|---:|")
    medians = {stage: statistics.median(values) for stage, values in result["per_stage"].items()}
    total = sum(medians.values())
    for stage, seconds in medians.items():
        print(f"| {stage} | {seconds:.2f} | {seconds / total:.0%} |")


def compare(pdfs: list[Path], rounds: int, baseline: str, readers: bool = False) -> None:
    """Alternate fresh processes of the baseline revision and this checkout (with each PDF
    reader when ``readers``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from revisions import checkout, code_env, measured

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="propdex-bench-offline-compare-") as tmp:
        codes = [(f"baseline {baseline}", checkout(baseline, Path(tmp) / "baseline"), {})]
        codes += [(f"this checkout, {reader} reader", REPO, {"PROPDEX_PDF_READER": reader})
                  for reader in ("fast", "layout")] if readers else [("this checkout", REPO, {})]
        runs: dict[str, list[tuple[dict, float]]] = {name: [] for name, *_ in codes}
        for _ in range(rounds):
            for name, tree, extra in codes:
                command = [sys.executable, str(Path(__file__).resolve()), "--rounds", "1",
                           "--json", "--code", str(tree), *map(str, pdfs)]
                done = measured(command, tree, code_env(tree, PREFECT_HOME=str(Path(tmp) / name),
                                                        **extra))
                runs[name].append((json.loads(done.stdout.strip().splitlines()[-1]), done.peak_rss_mib))
    print(f"offline pipeline on {len(pdfs)} PDFs; {rounds} alternating rounds per code, one "
          f"fresh process each; load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after\n")
    stages = sorted({s for results in runs.values() for r, _ in results for s in r["per_stage"]})
    print("| code | pages | wall (s) | pages per minute | peak RSS (MiB) | "
          "extraction worker peak RSS (MiB) | model load (s) | "
          + " | ".join(f"{s} (s)" for s in stages) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(stages))
    per_minute = {}
    for name, results in runs.items():
        wall = statistics.median(r["walls"][0] for r, _ in results)
        pages = results[0][0]["pages"]
        per_minute[name] = 60 * pages / wall
        stage_cells = " | ".join(
            f"{statistics.median(r['per_stage'].get(s, [0.0])[0] for r, _ in results):.2f}"
            for s in stages)
        print(f"| {name} | {pages} | {wall:.2f} | {per_minute[name]:.0f} | "
              f"{max(rss for _, rss in results):.0f} | "
              f"{max(r.get('worker_peak_mib', 0.0) for r, _ in results):.0f} | "
              f"{statistics.median(r['model_load'] for r, _ in results):.1f} | {stage_cells} |")
    before, *afters = per_minute.values()
    for name, after in zip(list(per_minute)[1:], afters, strict=True):
        print(f"\nthroughput ratio {name} / baseline: {after / before:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV",
                        help="compare with this git revision, side by side in fresh processes")
    parser.add_argument("--readers", action="store_true",
                        help="with --baseline: run this checkout with each PDF reader")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = parser.parse_args()
    pdfs = [p.resolve() for p in args.pdfs] or [CORPUS / name for name in DEFAULT_PDFS]
    missing = [str(p) for p in pdfs if not p.is_file()]
    if missing:
        raise SystemExit(f"not found: {', '.join(missing)} (the shared corpus sits beside the dev checkout)")
    if args.baseline:
        compare(pdfs, args.rounds, args.baseline, args.readers)
        return
    sys.path.insert(0, str(args.code))  # --code: the tree whose propdex is measured
    _environment()
    result = measure(pdfs, args.rounds)
    if args.json:
        print(json.dumps(result))
    else:
        print_single(result, pdfs, args.rounds)


if __name__ == "__main__":
    main()
