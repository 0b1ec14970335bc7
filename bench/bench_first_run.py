"""Wall seconds of the README's main command in a fresh process: `propdex ingest examples`, then
`propdex search "How are propositions graded?" --json`, each on a new database.

Three cases: just installed (a new Prefect home: Prefect migrates its database; and no
converted ONNX model in a new XDG_CACHE_HOME: the embedder converts it once per user), a new
Prefect home with the model converted, and an initialised Prefect home (Prefect has run before
on this machine). With --baseline REV (repeatable) the same commands run from a copy of that
git revision too, alternating with this checkout round by round, so the ratios are measured
side by side on the same load.

Run from the repository root:  python bench/bench_first_run.py [--rounds 3] [--baseline REV ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from revisions import REPO, checkout, code_env, measured  # noqa: E402

QUERY = "How are propositions graded?"


def first_run(tree: Path, db: Path, prefect_home: Path, cache_home: Path | None = None) -> dict[str, float]:
    """One README command on a new database ``db`` (a path never used before: Prefect's task
    cache, kept in its home, must not answer for a database of the same name)."""
    env = code_env(tree, PREFECT_HOME=str(prefect_home))
    if cache_home is not None:
        env["XDG_CACHE_HOME"] = str(cache_home)
    cli = [sys.executable, "-m", "propdex.cli"]
    ingest = measured([*cli, "ingest", "examples", "--db", str(db)], tree, env)
    search = measured([*cli, "search", QUERY, "--db", str(db), "--json"], tree, env)
    return {"ingest": ingest.seconds, "ingest_cpu": ingest.cpu_seconds,
            "search": search.seconds, "both": ingest.seconds + search.seconds,
            "rss": ingest.peak_rss_mib}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV", action="append", default=[],
                        help="git revision to compare with (repeatable)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="propdex-bench-first-run-") as tmp:
        work = Path(tmp)
        trees = {"this checkout": REPO}
        for revision in args.baseline:
            trees[f"baseline {revision}"] = checkout(revision, work / f"baseline-{revision}")
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for n in range(args.rounds):
            for i, (name, tree) in enumerate(trees.items()):
                run = work / f"round{n}-{i}"
                run.mkdir()
                results.setdefault((name, "1 just installed"), []).append(
                    first_run(tree, run / "db0", run / "home0", run / "cache0"))
                home = run / "prefect-home"
                results.setdefault((name, "2 new Prefect home"), []).append(
                    first_run(tree, run / "db1", home))
                # The same home again: migrated, Prefect has run before on this machine.
                results.setdefault((name, "3 initialised Prefect home"), []).append(
                    first_run(tree, run / "db2", home))
                shutil.rmtree(run, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}; medians of {args.rounds} rounds\n")
    print("| code | case | ingest (s) | ingest CPU (s) | search (s) | ingest + search (s) "
          "| ingest peak RSS (MiB) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (name, case), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {name} | {case} | {med['ingest']:.1f} | {med['ingest_cpu']:.1f} | {med['search']:.1f} | "
              f"{med['both']:.1f} | {med['rss']:.0f} |")


if __name__ == "__main__":
    main()
