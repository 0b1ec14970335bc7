"""Wall seconds of the README's main command in a fresh process: `propdex ingest examples`, then
`propdex search "How are propositions graded?" --json`, each on a new database.

Two cases: a new Prefect home (the very first run after install: Prefect migrates its
database) and an initialised one (Prefect has run before on this machine). With --baseline REV
the same commands run from a copy of that git revision too, alternating with this checkout
round by round, so the ratio is measured side by side on the same load.

Run from the repository root:  python bench/bench_first_run.py [--rounds 3] [--baseline main]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUERY = "How are propositions graded?"


def checkout(revision: str, into: Path) -> Path:
    """The tree of ``revision`` in ``into`` (git archive: no worktree to clean up)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of the command's own process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}:\n{stderr[-3000:]}")
    return seconds, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def first_run(tree: Path, work: Path, prefect_home: Path) -> dict[str, float]:
    db = work / "db"
    shutil.rmtree(db, ignore_errors=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PROPDEX_", "PREFECT_"))}
    env.update(PYTHONPATH=str(tree), PREFECT_HOME=str(prefect_home))
    cli = [sys.executable, "-m", "propdex.cli"]
    ingest, rss = timed([*cli, "ingest", "examples", "--db", str(db)], tree, env)
    search, _ = timed([*cli, "search", QUERY, "--db", str(db), "--json"], tree, env)
    return {"ingest": ingest, "search": search, "both": ingest + search, "rss": rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV", help="git revision to compare with")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="propdex-bench-first-run-") as tmp:
        work = Path(tmp)
        trees = {"this checkout": REPO}
        if args.baseline:
            trees[f"baseline {args.baseline}"] = checkout(args.baseline, work / "baseline")
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for n in range(args.rounds):
            for name, tree in trees.items():
                run = work / f"{n}-{len(results)}"
                run.mkdir()
                new_home = run / "new-prefect-home"
                results.setdefault((name, "new Prefect home"), []).append(
                    first_run(tree, run, new_home))
                # The same home again: migrated, Prefect has run before.
                results.setdefault((name, "initialised Prefect home"), []).append(
                    first_run(tree, run, new_home))
                shutil.rmtree(run, ignore_errors=True)
    print(f"load after: {os.getloadavg()[0]:.2f}; medians of {args.rounds} rounds\n")
    print("| code | Prefect home | ingest (s) | search (s) | ingest + search (s) | ingest peak RSS (MiB) |")
    print("|---|---|---:|---:|---:|---:|")
    for (name, case), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {name} | {case} | {med['ingest']:.1f} | {med['search']:.1f} | "
              f"{med['both']:.1f} | {med['rss']:.0f} |")


if __name__ == "__main__":
    main()
