"""What the retry of a degraded document costs: levels_of_agi.pdf (19 pages, the layout reader)
is ingested with its title refused by the checks (the scripted server answers "12345" twice,
the question and its repair), so the offline backend's title stands in and the next run
retries the document. Measured: that next run, in a fresh process, side by side with another
revision (--base), alternating round by round:

- "refused again": the title is refused again (a small model, run after run);
- "accepted": the title is accepted this time.

Per run: wall seconds, CPU seconds (the CLI with the children it waited for: Prefect's API,
the extraction workers), the seconds of the extraction stage in the run report (0 when
Prefect's task cache gave its result back), LLM requests by step and texts embedded. The LLM
and the embedder are the scripted OpenAI-compatible server, in this process.

Run from the repository root:  python bench/bench_retry.py --base REV [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from revisions import checkout, code_env, measured  # noqa: E402

from tests.scripted_fixtures import scripted_environment  # noqa: E402
from tests.scripted_server import CHAT_PATH, EMBEDDINGS_PATH, ScriptedServer, reply  # noqa: E402

PDF = REPO.parent / "shared" / "corpus" / "levels_of_agi.pdf"
REFUSED = json.dumps({"title": "12345"})  # no letters: the checks reject it
ACCEPTED = json.dumps({"title": "Levels of AGI for operationalizing progress on the path to AGI"})
SCENARIOS = {"refused again": REFUSED, "accepted": ACCEPTED}


def ingest(code: Path, db: Path, home: Path, server: ScriptedServer) -> dict:
    env = code_env(code, PREFECT_HOME=str(home), **scripted_environment(server))
    env.pop("PROPDEX_CHUNK_SIZE")  # the default chunks, not the tests' small ones
    run = measured([sys.executable, "-m", "propdex.cli", "ingest", str(PDF), "--db", str(db),
                    "--json"], code, env)
    report = json.loads(run.stdout)
    requests = server.requests
    return {
        "seconds": round(run.seconds, 2), "cpu_seconds": round(run.cpu_seconds, 2),
        "extract_seconds": round(report["stage_seconds"].get("extract", 0.0), 2),
        "reason": [d["reason"] for d in report["documents"]],
        "asked": dict(Counter(r.step for r in requests if r.path == CHAT_PATH)),
        "embedded": sum(len(r.body["input"]) for r in requests if r.path == EMBEDDINGS_PATH),
    }


def retry_run(code: Path, work: Path, second_title: str, server: ScriptedServer) -> dict:
    """The run after a run whose title was refused, on a fresh index and Prefect home."""
    work.mkdir(parents=True)
    server.reset()
    server.script(reply(REFUSED), reply(REFUSED), step="title")
    ingest(code, work / "db", work / "prefect", server)
    server.reset()
    server.script(reply(second_title), reply(second_title), step="title")
    return ingest(code, work / "db", work / "prefect", server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-retry-") as tmp, ScriptedServer() as server:
        work = Path(tmp)
        codes = {f"base {args.base}": checkout(args.base, work / "base"), "this tree": REPO}
        runs: dict[tuple[str, str], list[dict]] = {}
        for round_ in range(args.rounds):
            for scenario, title in SCENARIOS.items():
                for name, code in codes.items():
                    where = work / f"{round_}-{scenario.replace(' ', '-')}-{name.split()[0]}"
                    run = retry_run(code, where, title, server)
                    runs.setdefault((scenario, name), []).append(run)
                    print(json.dumps({"round": round_, "scenario": scenario, "code": name, **run}),
                          flush=True)
        print("\n| scenario | code | wall s (median) | CPU s (median) | extraction s (median) "
              "| LLM requests | texts embedded |\n|---|---|---|---|---|---|---|")
        for (scenario, name), measured_runs in runs.items():
            median = {k: statistics.median(r[k] for r in measured_runs)
                      for k in ("seconds", "cpu_seconds", "extract_seconds")}
            last = measured_runs[-1]
            asked = ", ".join(f"{step} {n}" for step, n in sorted(last["asked"].items())) or "none"
            print(f"| {scenario} | {name} | {median['seconds']:.1f} | {median['cpu_seconds']:.1f} "
                  f"| {median['extract_seconds']:.1f} | {asked} | {last['embedded']} |")


if __name__ == "__main__":
    main()
