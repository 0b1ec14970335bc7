"""End-to-end seconds per page of the offline pipeline (rule-based backend, local MiniLM),
with the breakdown by stage.

Each round ingests the PDFs into a fresh database through the ingest flow, in this process, so
Prefect's start-up and the model load happen once, before the first timed round (both are
reported separately). Stage seconds are summed over documents (documents run concurrently, so
their sum can exceed the wall time); the table gives medians over the rounds.

Run from the repository root:  python bench/bench_offline.py [--rounds 3] [PDF ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["PROPDEX_LLM"] = "offline"

CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_PDFS = ("levels_of_agi.pdf", "attention_is_all_you_need.pdf", "mck_energy_first_5_pages.pdf")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pdfs = args.pdfs or [CORPUS / name for name in DEFAULT_PDFS]
    missing = [str(p) for p in pdfs if not p.is_file()]
    if missing:
        raise SystemExit(f"not found: {', '.join(missing)} (the shared corpus sits beside the dev checkout)")

    from flows.ingest import ingest

    with tempfile.TemporaryDirectory(prefix="propdex-bench-offline-") as tmp:
        work = Path(tmp)
        prefect_start, model_load = warm_up(work)
        walls, per_stage, pages = [], {}, 0
        for n in range(args.rounds):
            started = time.perf_counter()
            summary = ingest(sources=[str(p) for p in pdfs], db=str(work / f"db{n}"))
            walls.append(time.perf_counter() - started)
            if summary["failed"]:
                raise SystemExit(f"documents failed: {summary['documents']}")
            for stage, seconds in summary["stage_seconds"].items():
                per_stage.setdefault(stage, []).append(seconds)
        from propdex.store import Index

        pages = sum(d["page_count"] for d in Index.open(str(work / "db0"), create=False).documents())
        totals = summary["totals"]

    wall = statistics.median(walls)
    print(f"offline pipeline on {len(pdfs)} PDFs, {pages} pages, {int(totals['chunks'])} chunks, "
          f"{int(totals['propositions_kept'])} propositions kept / "
          f"{int(totals['propositions_rejected'])} rejected; {args.rounds} rounds")
    print(f"once per process: Prefect start {prefect_start:.1f} s, MiniLM load {model_load:.1f} s\n")
    print("| measure | median |")
    print("|---|---:|")
    print(f"| wall time of a run (s) | {wall:.2f} |")
    print(f"| seconds per page | {wall / pages:.3f} |")
    print(f"| pages per minute | {60 * pages / wall:.0f} |")
    print("\n| stage (summed over documents) | seconds | share of stage time |")
    print("|---|---:|---:|")
    medians = {stage: statistics.median(values) for stage, values in per_stage.items()}
    total = sum(medians.values())
    for stage, seconds in medians.items():
        print(f"| {stage} | {seconds:.2f} | {seconds / total:.0%} |")


if __name__ == "__main__":
    main()
