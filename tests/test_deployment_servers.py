"""Deployments on a Prefect server of their own, beside test_deployments' shared stack: a
served run cancelled mid-extraction, and a deployment run on a server backed by PostgreSQL.

They were the last tests of test_deployments; apart, each module runs on one xdist worker
(`--dist loadfile`), so these two long stacks run beside the shared one instead of after it.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from uuid import UUID

import pytest

from tests.pdf_factory import make_pdf
from tests.prefect_server import PostgresUnavailableError, postgres_server, prefect_server, wait_for
from tests.test_deployments import (
    DEPLOYMENTS,
    RUN_SECONDS,
    _assert_completed,
    _deploy,
    _finished,
    _pause_schedules,
    _row_counts,
    _sources,
    real_server,
)


def _task_runs(client, flow_run_id: UUID) -> list:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    return client.read_task_runs(
        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))


def _extraction_workers_of_session(session: int) -> set[int]:
    """Live extraction worker processes of ``session`` (orphans keep their session)."""
    found = set()
    for process in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            fields = (process / "stat").read_text().rsplit(")", 1)[1].split()
            if (int(fields[3]) == session and fields[0] != "Z"
                    and b"propdex.extract.worker" in (process / "cmdline").read_bytes()):
                found.add(int(process.name))
    return found


@real_server
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_a_served_run_cancelled_mid_extraction_leaves_no_extraction_worker(tmp_path):
    """The UI's Cancel button sets the run Cancelling; serve.py's runner then SIGTERMs the
    run's process alone (a process worker signals its whole group), and SIGKILLs it 30 s
    later. No extraction worker goes on reading its document as an orphan: the run stops
    them, and a worker whose parent is gone ends by itself."""
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.states import Cancelling

    folder = tmp_path / "long"
    folder.mkdir()
    page = "Herons nest in tall trees near water. They eat fish, frogs and insects. " * 40
    for n in range(2):  # 200 pages through the layout engine: most of a minute each
        make_pdf(folder / f"herons{n}.pdf", [page] * 200)
    with prefect_server(tmp_path / "prefect") as stack:
        stack.env.update(PROPDEX_ALLOWED_ROOTS=str(tmp_path), PROPDEX_ALLOWED_DB_ROOTS=str(tmp_path),
                         PREFECT_RUNNER_POLL_FREQUENCY="2")
        served = stack.start("serve", [sys.executable, "deployments/serve.py", "ingest"])
        with SyncPrefectClient(api=stack.api_url) as client:
            deployment = wait_for(lambda: _deployment_named(client, DEPLOYMENTS["ingest"]),
                                  timeout=RUN_SECONDS, what="the served deployment",
                                  alive=stack.check_alive)
            _pause_schedules(client, deployment.id)
            run = client.create_flow_run_from_deployment(deployment.id, parameters={
                "sources": [str(folder)], "db": str(tmp_path / "db"),
                "options": {"pdf_reader": "layout"}})
            wait_for(lambda: any(t.name.startswith("extract") and t.state and t.state.is_running()
                                 for t in _task_runs(client, run.id)),
                     timeout=RUN_SECONDS, what="an extract task to run", alive=stack.check_alive)
            client.set_flow_run_state(run.id, Cancelling(), force=True)
            finished = _finished(client, run.id, stack.check_alive)
        workers = _extraction_workers_of_session(served.popen.pid)

    assert ("CANCELLED", set()) == (finished.state.type.value, workers)


def _deployment_named(client, name: str):
    from prefect.exceptions import ObjectNotFound

    try:
        return client.read_deployment_by_name(name)
    except ObjectNotFound:
        return None



# PostgreSQL ------------------------------------------------------------------------------

@real_server
def test_prefect_server_on_postgresql_runs_a_deployment(tmp_path):
    """For teams that outgrow SQLite: the same deployment on a server backed by PostgreSQL
    (a throwaway cluster of Debian's `postgresql` package, started here)."""
    sources, db = _sources(tmp_path / "sources"), tmp_path / "index"
    with contextlib.ExitStack() as resources:
        try:
            database_url = resources.enter_context(postgres_server())
        except PostgresUnavailableError as exc:
            pytest.skip(f"PostgreSQL cannot run here: {exc}")
        stack = resources.enter_context(prefect_server(tmp_path / "prefect", database_url))
        deployed = _deploy(stack, tmp_path)
        with deployed.client() as client:
            run = client.create_flow_run_from_deployment(
                deployed.id("ingest"), parameters={"sources": [str(sources)], "db": str(db)})
            finished = _finished(client, run.id, stack.check_alive)
            _assert_completed(stack, client, finished)
    assert 2 == _row_counts(db)["documents"]
