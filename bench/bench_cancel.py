"""Cancel an ingest deployment run as the UI's Cancel button does; report what it leaves.

    python bench/bench_cancel.py extract|llm threads|dask|dask-ext OUT [--repo PATH]

`prefect server start` (cancellation cleanup every 20 s), a process work pool, `prefect
deploy` of prefect.yaml's `ingest` from --repo (default: this checkout, so main and a branch
can be compared side by side) and `prefect worker start`. Three PDFs (120 pages through the
layout reader for `extract`, 2 pages for `llm`); LLM and embeddings on the scripted server,
which holds every request for `llm`. The run is set Cancelling once an extract task runs
(`extract`) or two requests are held (`llm`); once the run is final the held requests are
released (a worker still at work retries them). Reported as JSON: seconds until Cancelled,
task-run states at the cancel, at the final state, 60 s and 120 s after the cancel, LLM
requests received, extraction and Dask processes left, `propdex verify`, and the same run
again. `dask`: PROPDEX_DASK_ADDRESS=local (2 workers); `dask-ext`: a `dask scheduler` and two
`dask worker` processes that outlive the run.
"""

from __future__ import annotations

import argparse
import calendar
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
POOL = "propdex-pool"
PAGE = "Herons nest in tall trees near water. They eat fish, frogs and insects. " * 40
HELD_MS = 200_000
WATCHED = ("propdex.extract.worker", "distributed", "dask", "multiprocessing")


def make_sources(folder: Path, pages: int) -> Path:
    from tests.pdf_factory import make_pdf

    folder.mkdir(parents=True, exist_ok=True)
    for n in range(3):
        make_pdf(folder / f"herons{n}.pdf", [PAGE] * pages)
    return folder


def leftover_processes(prefect_home: Path) -> list[str]:
    """Extraction workers and Dask processes started under ``prefect_home`` (they inherit the
    environment of the stack's worker, whatever session or process group they are in)."""
    marker = f"PREFECT_HOME={prefect_home}".encode()
    found = []
    for process in Path("/proc").glob("[0-9]*"):
        try:
            if marker not in (process / "environ").read_bytes().split(b"\0"):
                continue
            args = (process / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile, or another user's
            continue
        if any(word in args for word in WATCHED):
            found.append(f"{process.name} {args.strip()}")
    return found


def start_dask_cluster(stack, repo: Path) -> str:
    from tests.prefect_server import free_port

    port = free_port()
    # Prefect imports flows/ingest.py as the module `ingest` and pickles the flow into each
    # task's context: the scheduler and the workers need that folder importable.
    stack.env["PYTHONPATH"] = f"{repo / 'flows'}:{repo}"
    stack.start("scheduler", [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                              "127.0.0.1", "--port", str(port), "--no-dashboard"], cwd=repo)
    time.sleep(5)
    for n in range(2):
        stack.start(f"dask-worker{n}", [sys.executable, "-m", "distributed.cli.dask_worker",
                                        f"tcp://127.0.0.1:{port}", "--nthreads", "4",
                                        "--no-dashboard"], cwd=repo)
    return f"tcp://127.0.0.1:{port}"


def process_group(pgid: int) -> dict[int, str]:
    """Processes of one process group: pid -> "<state> <command line>" (state Z: a zombie)."""
    members = {}
    for process in Path("/proc").glob("[0-9]*"):
        try:
            state, _, group = (process / "stat").read_text().rsplit(")", 1)[1].split()[:3]
            if int(group) != pgid:
                continue
            args = (process / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, ValueError):  # ended meanwhile, or another user's
            continue
        members[int(process.name)] = f"{state} {args[:90]}"
    return members


def cancel_timeline(client, run_id, pgid: int, worker_log: Path, started: float,
                    started_wall: float, timeout: float = 600):
    """Poll the run's state and its process group until the run is final: each change as
    [seconds after the cancel, what], and the worker's log lines about the cancel."""
    events, last_state, last_group = [], None, None
    deadline = started + timeout
    while time.monotonic() < deadline:
        run = client.read_flow_run(run_id)
        seconds = round(time.monotonic() - started, 2)
        if run.state and run.state.name != last_state:
            last_state = run.state.name
            events.append([seconds, f"run {last_state}"])
        group = process_group(pgid)
        if group != last_group:
            events.append([seconds, f"group {sorted(group.values()) or 'empty'}"])
            last_group = group
        if run.state and run.state.is_final():
            break
        time.sleep(0.25)
    else:
        raise TimeoutError(f"run {run_id} not final {timeout} s after the cancel")
    lines = []
    for line in worker_log.read_text(errors="replace").splitlines():
        stamp = line[:12]
        if not any(w in line.lower() for w in ("cancel", "kill", "terminat", "signal", "exit")):
            continue
        try:
            clock = time.strptime(time.strftime("%Y-%m-%d ", time.gmtime(started_wall)) + stamp[:8],
                                  "%Y-%m-%d %H:%M:%S")
        except ValueError:
            continue
        at = calendar.timegm(clock) + float("0" + stamp[8:12]) - started_wall
        if at > -1:
            lines.append([round(at, 2), line[12:200]])
    return run, events, lines


def state_counts(client, run_id) -> dict[str, int]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])))
    return dict(sorted(collections.Counter(
        f"{run.name.rsplit('-', 1)[0]}:{run.state.name if run.state else None}"
        for run in runs).items()))


def measure(when: str, runner: str, out: Path, repo: Path, quick: bool = False) -> dict:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.states import Cancelling

    from tests.prefect_server import prefect_command, prefect_server, run_prefect, wait_for
    from tests.scripted_fixtures import scripted_environment
    from tests.scripted_server import ScriptedServer

    sources = make_sources(out / "sources", 120 if when == "extract" else 2)
    result: dict = {"when": when, "runner": runner, "repo": str(repo)}
    with ScriptedServer() as llm, prefect_server(out / "prefect") as stack:
        env = stack.env
        env.update(scripted_environment(llm))
        env.update(PYTHONPATH=str(repo), PROPDEX_ALLOWED_ROOTS=str(out),
                   PROPDEX_ALLOWED_DB_ROOTS=str(out), PROPDEX_LLM_TIMEOUT="300",
                   PREFECT_SERVER_SERVICES_CANCELLATION_CLEANUP_LOOP_SECONDS="20")
        if runner == "dask":
            env.update(PROPDEX_DASK_ADDRESS="local", PROPDEX_DASK_WORKERS="2")
        elif runner == "dask-ext":
            address = start_dask_cluster(stack, repo)
            env.update(PROPDEX_DASK_ADDRESS=address, PYTHONPATH=str(repo))
        if when == "llm":
            llm.latency_ms = HELD_MS
        run_prefect(["work-pool", "create", POOL, "--type", "process"], env, cwd=repo)
        run_prefect(["deploy", "--prefect-file", "deployments/prefect.yaml", "--name", "ingest"],
                    env, cwd=repo)
        stack.start("worker", prefect_command("worker", "start", "--pool", POOL), cwd=repo)
        with SyncPrefectClient(api=stack.api_url) as client:
            deployment = client.read_deployment_by_name("propdex-ingest/ingest")
            for schedule in client.read_deployment_schedules(deployment.id):
                client.update_deployment_schedule(deployment.id, schedule.id, active=False)

            def final(run_id):
                run = client.read_flow_run(run_id)
                return run if run.state and run.state.is_final() else None

            parameters = {"sources": [str(sources)], "db": str(out / "db"),
                          "options": {"pdf_reader": "layout"}}
            run = client.create_flow_run_from_deployment(deployment.id, parameters=parameters)
            if when == "extract":
                wait_for(lambda: any(name.startswith("extract:Running")
                                     for name in state_counts(client, run.id)),
                         timeout=600, what="an extract task to run", alive=stack.check_alive)
            else:
                wait_for(lambda: len(llm.requests) >= 2 or None, timeout=600,
                         what="two held requests", alive=stack.check_alive)
            time.sleep(2)
            result["requests_at_cancel"] = len(llm.requests)
            pgid = int(client.read_flow_run(run.id).infrastructure_pid.rsplit(":", 1)[-1])
            started, started_wall = time.monotonic(), time.time()
            client.set_flow_run_state(run.id, Cancelling(), force=True)
            result["states_at_cancel"] = state_counts(client, run.id)
            done, result["timeline"], result["worker_log"] = cancel_timeline(
                client, run.id, pgid, stack.home / "worker.log", started, started_wall)
            result["cancel_seconds"] = round(time.monotonic() - started, 1)
            result["flow_state"] = done.state.name
            result["states_at_final"] = state_counts(client, run.id)
            result["requests_at_final"] = len(llm.requests)
            llm.release()
            if quick:
                llm.latency_ms = 0
                llm.release()
                return result
            for seconds in (60, 120):
                time.sleep(max(0.0, seconds - (time.monotonic() - started)))
                result[f"states_after_{seconds}s"] = state_counts(client, run.id)
            result["requests_after_release"] = len(llm.requests) - result["requests_at_final"]
            # An existing cluster's processes stay up by design.
            result["processes_left"] = ([] if runner == "dask-ext"
                                        else leftover_processes(out / "prefect"))
            llm.latency_ms = 0
            llm.release()
            verify = subprocess.run([sys.executable, "-m", "propdex.cli", "verify", "--db",
                                     str(out / "db")], capture_output=True, text=True, env=env,
                                    cwd=repo)
            result["verify"] = [verify.returncode, (verify.stdout + verify.stderr).strip()]
            again = client.create_flow_run_from_deployment(deployment.id, parameters=parameters)
            started = time.monotonic()
            done = wait_for(lambda: final(again.id), timeout=900, what="the next run to end",
                            alive=stack.check_alive)
            result["next_run"] = [done.state.name, round(time.monotonic() - started, 1)]
            result["next_run_states"] = state_counts(client, again.id)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("when", choices=["extract", "llm"], help="cancel mid-extraction or mid-LLM")
    parser.add_argument("runner", choices=["threads", "dask", "dask-ext"],
                        help="threads, a LocalCluster, or an existing Dask cluster")
    parser.add_argument("out", type=Path, help="folder for the sources, index and server files")
    parser.add_argument("--repo", type=Path, default=REPOSITORY,
                        help="checkout whose prefect.yaml is deployed (default: this one)")
    parser.add_argument("--quick", action="store_true",
                        help="stop once the run is final: no later states, verify or next run")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPOSITORY))
    result = measure(args.when, args.runner, args.out.resolve(), args.repo.resolve(), args.quick)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
