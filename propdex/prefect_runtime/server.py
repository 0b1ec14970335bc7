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
CLI ends, SIGKILL included, so no server outlives its run. Ctrl-C reaches the whole process
group: the CLI reports the interruption, and the server ignores it rather than printing a
traceback of whatever it was importing.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

# Distinct from uvicorn's start-up failure (3), which the CLI answers with a new port.
NOT_NEEDED = 4
# Prefect's home cannot be prepared: the CLI checks it again itself to report why.
HOME_UNUSABLE = 5


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
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    threading.Thread(target=_stop_when_stdin_closes, args=(server,), daemon=True).start()
    serving.start()
    while serving.is_alive():
        serving.join(0.5)  # a timed join lets the main thread run the SIGTERM handler
    return 0 if server.started else STARTUP_FAILURE


def _stop_when_stdin_closes(server) -> None:
    """Shut ``server`` down once the launching process is gone (its end of the pipe closed)."""
    # The raw descriptor: a daemon thread blocked in sys.stdin's buffered reader holds its lock,
    # which the interpreter's shutdown then fails to take (a fatal error on exit).
    while os.read(0, 1 << 16):
        pass
    server.should_exit = True


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # before the imports Ctrl-C could interrupt
    sys.exit(serve(int(sys.argv[1])))
