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
its services handle every event it has received (bounded by DRAIN_SECONDS), then shuts down. Ctrl-C reaches the whole process
group: the CLI reports the interruption, and the server ignores it rather than printing a
traceback of whatever it was importing.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

# Distinct from uvicorn's start-up failure (3), which the CLI answers with a new port.
NOT_NEEDED = 4
# Prefect's home cannot be prepared: the CLI checks it again itself to report why.
HOME_UNUSABLE = 5
# The longest a stop waits for the services to handle the events already received; the CLI
# waits this long and more before it kills the server.
DRAIN_SECONDS = 10.0
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
    server = uvicorn.Server(uvicorn.Config(
        "prefect.server.api.server:create_app", factory=True, host="127.0.0.1", port=port,
        log_level="error", lifespan="on"))
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


def unhandled_messages() -> int:
    """Messages Prefect's in-memory broker delivered to a service that has not yet handled them.

    A client's task-run states reach the database only as events: the task-run recorder
    writes them one by one as it takes them from its subscription. uvicorn's shutdown cancels
    the services: what the recorder has not taken yet is lost, and a write in progress is
    logged as "Error flushing N events", so the run's last task runs would show as Running or
    Pending, or not at all, in the UI. The broker counts deliveries and completed handlings
    per topic; a message whose handler failed is retried and counted once handled."""
    from prefect.server.utilities.messaging.memory import METRICS

    return sum(counts["published"] - counts["consumed"] for counts in list(METRICS.values()))


class _Stop:
    """Shuts the server down once nothing it received is left to handle: no request or
    WebSocket still being served (the client's events socket is read to its end), and no
    event a service has yet to handle; after DRAIN_SECONDS, at once."""

    def __init__(self, server) -> None:
        self._server = server
        self._requested = threading.Lock()

    def request(self) -> None:
        if self._requested.acquire(blocking=False):  # a second SIGTERM changes nothing
            threading.Thread(target=self._drain_then_exit, name="propdex-prefect-stop",
                             daemon=True).start()

    def _drain_then_exit(self) -> None:
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline and not self._drained():
            time.sleep(_DRAIN_POLL_SECONDS)
        self._server.should_exit = True

    def _drained(self) -> bool:
        # Read from this thread while the server's loop changes them: a stale read only
        # delays the stop by one poll.
        return not self._server.server_state.tasks and unhandled_messages() <= 0


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
