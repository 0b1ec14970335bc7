"""The process of the ephemeral Prefect API a CLI ingest reports to:
``python -m propdex.prefect_runtime.server PORT``.

The CLI launches it before importing Prefect itself, so this process imports Prefect on the
other core instead of after the CLI's own import: its start-up is a first run's critical
path. It exits at once with NOT_NEEDED when a server is configured (PREFECT_API_URL in a
profile or prefect.toml) or ephemeral mode is off; otherwise it creates Prefect's home
(propdex.prefect_runtime.api.prepare_prefect_home) and serves Prefect's API app, without the
UI, on 127.0.0.1:PORT with uvicorn, as Prefect's SubprocessASGIServer does.

The CLI that launched it owns it: it stops the server with SIGTERM when it exits, and the
server also shuts down when its stdin (a pipe from the CLI) closes, which happens however the
CLI ends, SIGKILL included, so no server outlives its run. Either way the server first lets
its services handle every event it has received, for as long as they keep handling events
(drain_events), then shuts down. Ctrl-C reaches the whole process group: the CLI reports the
interruption, and the server ignores it rather than printing a traceback of whatever it was
importing.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

# Distinct from uvicorn's start-up failure (3), which the CLI answers with a new port.
NOT_NEEDED = 4
# Prefect's home cannot be prepared: the CLI checks it again itself to report why.
HOME_UNUSABLE = 5
# A stop waits while the services keep handling the events received, however slowly a loaded
# host lets them: it gives up once they handled nothing for DRAIN_STALL_SECONDS (a service is
# stuck, or an event can never be handled), or after DRAIN_LIMIT_SECONDS in all. The CLI waits
# the limit and more before it kills the server.
DRAIN_STALL_SECONDS = 10.0
DRAIN_LIMIT_SECONDS = 120.0
# A drain this long tells the user why the CLI has not exited yet.
DRAIN_NOTICE_SECONDS = 5.0
_DRAIN_POLL_SECONDS = 0.02


def serve(port: int) -> int:
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_ENABLED,
        get_current_settings,
    )

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return NOT_NEEDED
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE  # the port was taken: the CLI tries another

    from propdex.errors import PrefectStartError
    from propdex.prefect_runtime.api import prepare_prefect_home

    try:
        prepare_prefect_home(get_current_settings())
    except PrefectStartError:
        return HOME_UNUSABLE
    api_settings = get_current_settings().server.api
    server = uvicorn.Server(uvicorn.Config(
        "prefect.server.api.server:create_app", factory=True, host="127.0.0.1", port=port,
        log_level="error", lifespan="on",
        # Prefect's keepalive settings, as `prefect server start` passes them; an interval of
        # 0 means none, as the CLI's environment sets it (api.server_environment says why).
        ws_ping_interval=api_settings.websocket_ping_interval or None,
        ws_ping_timeout=api_settings.websocket_ping_timeout))
    # Served from a thread, so uvicorn takes over no signal: Ctrl-C stays ignored, and SIGTERM
    # (the CLI's stop) or the end of stdin shut the server down as uvicorn's own handler would.
    serving = threading.Thread(target=server.run, name="propdex-prefect-api")
    stop = _Stop(server)
    signal.signal(signal.SIGTERM, lambda *_: stop.request())
    threading.Thread(target=_stop_when_stdin_closes, args=(stop,), daemon=True).start()
    serving.start()
    while serving.is_alive():
        serving.join(0.5)  # a timed join lets the main thread run the SIGTERM handler
    return 0 if server.started else STARTUP_FAILURE


def broker_counts() -> tuple[int, int]:
    """Messages Prefect's in-memory broker delivered to its services, and those handled.

    A client's task-run states reach the database only as events: the task-run recorder
    writes them one by one as it takes them from its subscription. uvicorn's shutdown cancels
    the services: what the recorder has not taken yet is lost, and a write in progress is
    logged as "Error flushing N events", so the run's last task runs would show as Running or
    Pending, or not at all, in the UI. The broker counts deliveries and completed handlings
    per topic; a message whose handler failed is retried and counted once handled."""
    from prefect.server.utilities.messaging.memory import METRICS

    counts = list(METRICS.values())
    return (sum(count["published"] for count in counts),
            sum(count["consumed"] for count in counts))


class TaskRunRecorderQueues:
    """What Prefect's task-run recorder has received but not written yet, in the server's
    event loop ``loop``, read from another thread.

    The broker counts a message as handled once the recorder has queued it for writing, and a
    write that fails (SQLite's "database is locked" when other writers hold the database, as on
    a busy host) puts the event back on that queue, where only the recorder's periodic flush
    takes it again. So an empty broker does not mean every state is in the database: the
    recorder's own queue must be empty too. Prefect offers no API for either queue; they are
    found among the loop's tasks (the recorder's Consumer.run holds its handler, whose closure
    holds the queue) and, when not found (another Prefect version), count as empty."""

    def __init__(self, loop) -> None:
        self._loop = loop
        self._queues: tuple | None = None

    def _find(self) -> tuple | None:
        if self._queues is None and self._loop is not None:
            try:
                self._queues = self._search()
            except Exception:  # Prefect's internals changed: the stop must still happen
                self._queues = None
            if self._queues is None:
                self._loop = None  # not searched again at every poll
        return self._queues

    def _search(self) -> tuple | None:
        import asyncio

        for task in asyncio.all_tasks(self._loop):
            coro = task.get_coro()
            frame = getattr(coro, "cr_frame", None)
            if frame is None or getattr(coro, "__qualname__", "") != "Consumer.run":
                continue
            handler = frame.f_locals.get("handler")
            if getattr(handler, "__module__", "") != "prefect.server.services.task_run_recorder":
                continue
            cells = dict(zip(handler.__code__.co_freevars, handler.__closure__ or (),
                             strict=True))
            if "queue" in cells and "self" in frame.f_locals:
                return frame.f_locals["self"].subscription, cells["queue"].cell_contents
        return None

    def waiting_writes(self) -> int:
        """Events the recorder has taken from the broker and not yet written."""
        queues = self._find()
        return 0 if queues is None else queues[1].qsize()

    def unrecorded_states(self) -> int:
        """Task-run states not in the database yet, the one being written excepted."""
        queues = self._find()
        if queues is None:
            return 0
        subscription, writes = queues
        # list() copies a deque in one step under the GIL: the server's loop, which fills and
        # empties these queues from another thread, cannot change it halfway.
        delivered = [message for queue in (subscription._queue, subscription._retry)
                     for message in list(queue._queue)]
        return writes.qsize() + sum(
            1 for message in delivered
            if str(message.attributes.get("event", "")).startswith("prefect.task-run."))


def drain_events(
    drained: Callable[[], bool],
    counts: Callable[[], tuple[int, ...]],
    *,
    stall_seconds: float = DRAIN_STALL_SECONDS,
    limit_seconds: float = DRAIN_LIMIT_SECONDS,
    notice_seconds: float = DRAIN_NOTICE_SECONDS,
    notice: Callable[[], None] = lambda: None,
) -> str | None:
    """Wait until ``drained()``, as long as ``counts()`` (of events received and handled) keeps
    changing.

    None once drained; otherwise why the wait ended: nothing changed for ``stall_seconds``,
    or ``limit_seconds`` passed. ``notice`` is called once if the wait lasts
    ``notice_seconds``. A fixed bound cannot suit every host: on a busy one the services
    record a burst of task runs several times slower than on an idle one, and a normal run
    pays nothing, since its events are handled before the CLI stops the server."""
    started = progressed = time.monotonic()
    seen = counts()
    noticed = False
    while not drained():
        now = time.monotonic()
        if now - started >= limit_seconds:
            return f"it was still recording after {limit_seconds:g} s"
        current = counts()
        if current != seen:
            seen, progressed = current, now
        elif now - progressed >= stall_seconds:
            return f"its services handled no event for {stall_seconds:g} s"
        if not noticed and now - started >= notice_seconds:
            noticed = True
            notice()
        time.sleep(_DRAIN_POLL_SECONDS)
    return None


class _Stop:
    """Shuts the server down once nothing it received is left to handle: no request or
    WebSocket still being served (the client's events socket is read to its end), and no
    event a service has yet to handle (drain_events says how long it waits)."""

    def __init__(self, server) -> None:
        self._server = server
        self._requested = threading.Lock()

    def request(self) -> None:
        if self._requested.acquire(blocking=False):  # a second SIGTERM changes nothing
            threading.Thread(target=self._drain_then_exit, name="propdex-prefect-stop",
                             daemon=True).start()

    def _drain_then_exit(self) -> None:
        servers = getattr(self._server, "servers", None) or []
        recorder = TaskRunRecorderQueues(servers[0].get_loop() if servers else None)

        def counts() -> tuple[int, ...]:
            return (*broker_counts(), recorder.waiting_writes())

        def drained() -> bool:
            # Read from this thread while the server's loop changes them: a stale read only
            # delays the stop by one poll.
            published, handled, waiting = counts()
            return not self._server.server_state.tasks and published <= handled and not waiting

        def still_recording() -> None:
            print(f"propdex: Prefect's API is recording the run's last "
                  f"{recorder.unrecorded_states()} task-run states before it stops (while it "
                  f"makes progress, up to {DRAIN_LIMIT_SECONDS:g} s)", file=sys.stderr, flush=True)

        gave_up = drain_events(drained, counts, notice=still_recording)
        if gave_up is not None:
            published, handled = broker_counts()
            print(f"propdex: warning: Prefect's API stopped ({gave_up}) with "
                  f"{recorder.unrecorded_states()} task-run states not recorded and "
                  f"{published - handled} events unhandled: Prefect's UI shows those task runs "
                  "Pending or Running, or not at all; the index is complete",
                  file=sys.stderr, flush=True)
        self._server.should_exit = True


def _stop_when_stdin_closes(stop: _Stop) -> None:
    """Stop the server once the launching process is gone (its end of the pipe closed)."""
    # The raw descriptor: a daemon thread blocked in sys.stdin's buffered reader holds its lock,
    # which the interpreter's shutdown then fails to take (a fatal error on exit).
    while os.read(0, 1 << 16):
        pass
    stop.request()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # before the imports Ctrl-C could interrupt
    sys.exit(serve(int(sys.argv[1])))
