"""Where a run's tasks execute: threads in the flow's process, or a Dask cluster.

Tasks receive only settings and their inputs (see propdex.runtime), so the same flow runs
on prefect-dask's DaskTaskRunner unchanged: each worker process builds its own LLM client,
embedder and cache connection on first use.
"""

from __future__ import annotations

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from propdex.settings import Settings

# Most task time is spent waiting on LLM calls and storage, not on the CPU.
THREADS = 24
# Threads per process of a local Dask cluster: documents a worker runs at once (each
# document's LLM calls fan out further over the process's LLM pool).
LOCAL_THREADS_PER_WORKER = 4
LOCAL = "local"


def task_runner_for(settings: Settings) -> TaskRunner:
    """Threads when no Dask address is set; a LocalCluster of ``dask_workers`` processes
    for ``local``; otherwise the Dask scheduler at ``dask_address``."""
    if not settings.dask_address:
        return ThreadPoolTaskRunner(max_workers=THREADS)
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
            "threads_per_worker": LOCAL_THREADS_PER_WORKER,
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
