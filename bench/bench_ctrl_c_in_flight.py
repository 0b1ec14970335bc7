"""Ctrl-C of `propdex ingest` while the scripted server holds a propositions request: seconds
from SIGINT to exit, for the code of each TREE in turn (alternated, so trees share the load).

    python bench/bench_ctrl_c_in_flight.py TREE[,TREE...] ROUNDS LLM_TIMEOUT_SECONDS

The fifth propositions request is held for 600 s; before the stop cut requests in flight, the
run waited for it until LLM_TIMEOUT_SECONDS.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.pdf_factory import make_pdf  # noqa: E402
from tests.scripted_fixtures import scripted_environment  # noqa: E402
from tests.scripted_server import Action, ScriptedServer, delayed  # noqa: E402

PAGE = ("Herons nest in tall trees near water. They eat fish, frogs and insects. "
        "A heron stands still in shallow water and strikes fast. ") * 6


def seconds_to_exit(tree: str, llm_timeout: str) -> tuple[int, float]:
    """(exit code, seconds from SIGINT to exit) of one interrupted ingest with ``tree``'s code."""
    work = Path(tempfile.mkdtemp())
    src = work / "src"
    src.mkdir()
    for n in range(3):
        make_pdf(src / f"herons{n}.pdf", [f"Heron report {n}. {PAGE}", PAGE, PAGE])
    with ScriptedServer(latency_ms=50) as server:
        server.script(*[Action()] * 4, delayed(600_000), step="propositions")
        env = dict(os.environ, **{**scripted_environment(server), "PROPDEX_LLM_TIMEOUT": llm_timeout},
                   PROPDEX_LLM_CONCURRENCY="1", PROPDEX_DOCUMENT_CONCURRENCY="1",
                   PROPDEX_CACHE_DIR=str(work / "cache"), PYTHONPATH=tree)
        run = subprocess.Popen([sys.executable, "-m", "propdex.cli", "ingest", str(src), "--db", str(work / "db")],
                               env=env, cwd=tree, start_new_session=True, text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while run.poll() is None and server.calls("propositions") < 5:
            time.sleep(0.1)
        time.sleep(0.5)  # the request waits for its answer
        os.killpg(run.pid, signal.SIGINT)
        interrupted = time.monotonic()
        code = run.wait()
        return code, time.monotonic() - interrupted


def main() -> None:
    trees, rounds, llm_timeout = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
    for _ in range(rounds):
        for tree in trees:
            code, seconds = seconds_to_exit(tree, llm_timeout)
            print(f"{tree}: exit {code} after {seconds:.1f} s; load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
