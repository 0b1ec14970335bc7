"""Where a run's tasks execute: threads in the flow's process, or a Dask cluster.

Tasks receive only settings and their inputs (see propdex.runtime), so the same flow runs
on prefect-dask's DaskTaskRunner unchanged: each worker process builds its own LLM client,
embedder and cache connection on first use.

propdex.stopping acts in the process it is called in, and a cancelled run's SIGTERM reaches
only the flow's process: on Dask its tasks run in worker processes, which get no signal
(closing the flow's client only drops the tasks not yet started, and an external cluster
outlives the run). The Dask client's ``run`` calls a function in every worker at once, busy
or not: it carries the stop to the workers, and the go-ahead for the next run on them.
"""

from __future__ import annotations

import math

from prefect.context import FlowRunContext
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from propdex.settings import Settings
from propdex.stopping import allow_run_work, stop_run_work

# A document's chain: extract, write_context, split, propose, embed, commit_document.
STAGES_PER_DOCUMENT = 6
# Threads per process of a local Dask cluster, at least: documents a worker runs at once
# (each document's LLM calls fan out further over the process's LLM pool).
LOCAL_THREADS_PER_WORKER = 4
LOCAL = "local"


def threads_for(settings: Settings) -> int:
    """Threads of a run's pool: all the stages of ``document_concurrency`` documents. On
    threads, a task waiting for the stage before it holds its thread (Prefect resolves a
    task's upstream futures in the thread that runs it), and the flow submits a document's
    six stages at once; fewer threads would leave the window's documents queued behind
    waiting stages. Threads start only when a task needs one, and the flow's window
    (flows.ingest) keeps at most this many tasks unfinished."""
    return STAGES_PER_DOCUMENT * settings.document_concurrency


def task_runner_for(settings: Settings, *, sized: bool = True) -> TaskRunner:
    """Threads when no Dask address is set; a LocalCluster of ``dask_workers`` processes
    for ``local``; otherwise the Dask scheduler at ``dask_address``.

    The threads are ``threads_for(settings)``; with ``sized`` off, as many as the flow's
    window starts, for a flow whose runner is made when it is imported, before its run's
    settings are known (a deployment: its run form sets document_concurrency per run)."""
    if not settings.dask_address:
        return ThreadPoolTaskRunner(max_workers=threads_for(settings) if sized else None)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as exc:  # optional dependency
        raise ImportError(
            "running on Dask needs the 'dask' extra: pip install 'propdex[dask]' "
            f"(missing: {exc.name})"
        ) from exc
    if settings.dask_address == LOCAL:
        return DaskTaskRunner(cluster_kwargs={
            "n_workers": settings.dask_workers,
            "processes": True,
            # Enough threads among the workers for the documents in flight: on Dask a task
            # waiting for its upstream holds no thread (the scheduler starts it when they end).
            "threads_per_worker": max(LOCAL_THREADS_PER_WORKER, math.ceil(
                settings.document_concurrency / settings.dask_workers)),
            "dashboard_address": None,  # no web dashboard (needs bokeh, opens a port)
            "env": prefect_api_for_workers(),
        })
    return DaskTaskRunner(address=settings.dask_address)


def prefect_api_for_workers() -> dict[str, str]:
    """Environment that makes local worker processes report to the flow's Prefect API.

    Without PREFECT_API_URL, the flow process runs Prefect's ephemeral API in a subprocess;
    a worker process would start an ephemeral API of its own (and record its task runs
    there). So that API is started now and its URL handed to the workers."""
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return {}  # workers inherit the variable
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # one per process: the one the flow's client uses
    server.start()
    return {"PREFECT_API_URL": server.api_url}


def _dask_runner():
    """The current flow run's DaskTaskRunner, or None when its tasks run on threads."""
    runner = getattr(FlowRunContext.get(), "task_runner", None)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:  # without the dask extra no flow runs on Dask
        return None
    return runner if isinstance(runner, DaskTaskRunner) else None


def allow_dask_work() -> None:
    """Before a run submits tasks to Dask: lift a stop that a cancelled run left in the workers."""
    runner = _dask_runner()
    if runner is not None:
        runner.client.run(allow_run_work)


def stop_dask_work() -> None:
    """A cancelled or interrupted run stops its tasks in every Dask worker: their LLM and
    embedding requests fail at once and their extraction workers are killed. Called only once
    the run has submitted tasks: the runner's ``client`` is then the one they went to (before,
    reading it would start a cluster)."""
    runner = _dask_runner()
    if runner is not None:
        # A worker that cannot be reached any more runs nothing of this run either.
        runner.client.run(stop_run_work, on_error="ignore")
