"""A run whose tasks run on a Dask cluster that outlives it (``--dask ADDRESS``) stops its work
in the workers when it is interrupted or cancelled, and the next run on them works again."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.scripted_fixtures import scripted_environment
from tests.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.prefect,
    pytest.mark.skipif(importlib.util.find_spec("prefect_dask") is None,
                       reason="prefect-dask is not installed: pip install 'propdex[dask]'"),
]

REPO = Path(__file__).resolve().parents[1]
HELD_MS = 600_000  # every request is held until the server releases it
QUIET_SECONDS = 5  # a worker not stopped retries its released request within this


@dataclass
class DaskRuns:
    requests_after_release: int  # requests the server got once the interrupted run's were released
    interrupted_code: int
    next_run_code: int
    next_run_output: str


@pytest.fixture(scope="module")
def dask_runs(tmp_path_factory) -> Iterator[DaskRuns]:
    from distributed import LocalCluster

    from flows.runners import prefect_api_for_workers

    base = tmp_path_factory.mktemp("dask-stop")
    sources = base / "sources"
    sources.mkdir()
    for name in ("herons", "egrets"):
        (sources / f"{name}.md").write_text(
            f"# {name.title()}\n\n{name.title()} nest in tall trees near water. They eat fish.\n",
            encoding="utf-8")
    api = prefect_api_for_workers()  # the CLI runs and the workers report to one API
    with (ScriptedServer(latency_ms=HELD_MS) as server,
          LocalCluster(n_workers=1, processes=True, threads_per_worker=4,
                       dashboard_address=None, env=api) as cluster):
        env = dict(os.environ, **{**scripted_environment(server), "PROPDEX_LLM_TIMEOUT": "900"},
                   **api, PROPDEX_CACHE_DIR=str(base / "cache"))
        command = [sys.executable, "-m", "propdex.cli", "ingest", str(sources), "--db",
                   str(base / "db"), "--dask", cluster.scheduler_address]
        run = subprocess.Popen(command, env=env, cwd=REPO, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and run.poll() is None and not server.requests:
            time.sleep(0.1)
        assert run.poll() is None and server.requests, "no request reached the server"
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        interrupted_code = run.wait(timeout=120)
        released = len(server.requests)
        # The held requests end unanswered: a worker still at work retries them.
        server.release()
        time.sleep(QUIET_SECONDS)
        requests_after_release = len(server.requests) - released

        server.latency_ms = 0
        server.release()
        finished = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                                  timeout=300)
        yield DaskRuns(requests_after_release, interrupted_code, finished.returncode,
                       finished.stdout + finished.stderr)


def test_an_interrupted_run_sends_no_more_requests_from_the_dask_workers(dask_runs):
    assert (130, 0) == (dask_runs.interrupted_code, dask_runs.requests_after_release)


def test_the_next_run_on_the_same_dask_workers_completes(dask_runs):
    assert 0 == dask_runs.next_run_code, dask_runs.next_run_output


def test_the_next_run_on_the_same_dask_workers_gets_its_llm_answers(dask_runs):
    # A stop left in the workers would fail each request at once: offline fallbacks.
    assert ("| indexed | 2 |" in dask_runs.next_run_output,
            "fallback" in dask_runs.next_run_output) == (True, False), dask_runs.next_run_output
