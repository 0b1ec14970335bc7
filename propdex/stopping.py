"""Stopping the work of a run that is cancelled or interrupted.

A flow run cancelled from the Prefect UI gets SIGTERM from its runner (served deployments and
process workers alike), which Prefect turns into an exception in the flow's main thread; Ctrl-C
on the CLI is a KeyboardInterrupt there. Either way the process can only end once its task
threads return, and the runner SIGKILLs it after a grace period (30 s) otherwise. So the flow
stops the work its threads wait for: extraction workers are killed (their documents end as
crashed extractions), the requests in flight to LLM and embedding servers are cut (their
connections shut down, propdex.llm.live_sockets: each fails at once, however long the server
would take, and is not retried), and no request starts any more, nor a retry
(propdex.llm.client.call_with_retries, and RequestLimiter.slot after its wait). Nothing is
committed for a document whose chain was cut short, so its last version stays in the index and
the next run processes it again.
"""

from __future__ import annotations

import threading

from propdex.errors import RunStoppedError

_stopping = threading.Event()


def stop_run_work() -> None:
    """Make every LLM or embeddings request of this process fail at once, those in flight and
    later ones, and kill the extraction workers, busy ones included."""
    from propdex.llm.live_sockets import cut_connections

    _stopping.set()  # first: a connection opened from now on is cut as it opens
    cut_connections()
    from propdex.extract.isolated import stop_workers  # after the cut: it may be a first import

    stop_workers()


def allow_run_work() -> None:
    """A new run starts in this process: its work runs again."""
    _stopping.clear()


def run_is_stopping() -> bool:
    return _stopping.is_set()


def check_not_stopped(what: str) -> None:
    if _stopping.is_set():
        raise RunStoppedError(f"{what}: not sent, the run is being cancelled")


def cut_off_error(what: str) -> RunStoppedError:
    """The error of a request that was in flight when the run stopped."""
    return RunStoppedError(f"{what}: cut off, the run is being cancelled")
