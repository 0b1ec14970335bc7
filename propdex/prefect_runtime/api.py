"""The Prefect API a CLI ingest reports to, started early so start-up overlaps other work.

Without ``PREFECT_API_URL``, Prefect starts its ephemeral API in a subprocess the moment the
flow first asks for a client, and waits for it. Here the server process
(propdex.prefect_runtime.server: Prefect's API app under uvicorn, as Prefect's own subprocess
runs it) is launched first thing, before this process imports Prefect, so that its start-up
(importing the server, migrating a new database) runs on the other core while the CLI imports
the flow and loads the model. A configured server (``PREFECT_API_URL`` in the environment, a
profile or prefect.toml) is used as it is: the server process sees it too and steps aside.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from propdex.errors import PrefectStartError
from propdex.prefect_runtime.server import DRAIN_LIMIT_SECONDS, HOME_UNUSABLE, NOT_NEEDED

if TYPE_CHECKING:
    from prefect.settings import Settings

# uvicorn's exit code when start-up fails, e.g. because another process took the port since
# it was chosen: Prefect's own launcher tries again on a new port, and so does this one.
_STARTUP_FAILED = 3
_ATTEMPTS = 3
# The server's stop waits up to DRAIN_LIMIT_SECONDS for its services to record what they
# received, then shuts down in well under this margin, even on a busy host.
_STOP_SECONDS = DRAIN_LIMIT_SECONDS + 20


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare_prefect_home(settings: Settings) -> None:
    """Create Prefect's home (``settings``: Prefect's), where the server's SQLite database
    lives: Prefect creates it when the flow side first imports it, possibly after the server
    has tried to open the database. PrefectStartError says why it cannot be created."""
    try:
        settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise PrefectStartError(
            f"cannot create Prefect's home {settings.home} (PREFECT_HOME): {exc.strerror or exc}"
        ) from exc


def server_environment() -> dict[str, str]:
    """The ephemeral server's environment: settings every such server gets, unless set."""
    return {
        # Registering Prefect's block types in a new database is CPU on the server's critical
        # path, and a CLI flow run uses no block; a full `prefect server start` registers
        # them when it first runs. An explicit setting is kept.
        "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
        # Without this, the skipped registration still loads every block collection to hash
        # it and then records in the home's memo_store.toml that blocks are registered, so a
        # later server on that home computing the same hash would skip registering them and
        # its UI would list no block types.
        "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false",
        # The server's telemetry heartbeat: propdex makes no network calls it was not asked
        # for (the CLI sets this for itself too; here it holds however the server is started).
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        # A task-run state whose write failed (SQLite busy with other writers, as on a loaded
        # host) waits in the recorder's queue for its periodic flush, one event per flush: every
        # 5 s by default, which the stop's drain then waits for (server.TaskRunRecorderQueues).
        "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
        # No WebSocket keepalive (0 turns uvicorn's off): the server reads a client's events
        # socket only as fast as it publishes the events read, so on a starved host the pong
        # answering its ping waits behind a backlog of task-run events; after the timeout the
        # server closes the socket and the unread events are lost (the client resends those it
        # has not checkpointed only at its next emit, and a CLI's last emit is its flow's end).
        # The client's process ending closes its sockets anyway, and the server ends with it.
        "PREFECT_SERVER_API_WEBSOCKET_PING_INTERVAL": "0",
        **os.environ,
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
    }


def launch_server_process(port: int) -> subprocess.Popen:
    """propdex.prefect_runtime.server on ``port``: Prefect's API without the UI, running only the
    services an ephemeral server runs. Imports nothing of Prefect here."""
    # Its stdin is a pipe only this process writes to: the server shuts down when it closes.
    return subprocess.Popen([sys.executable, "-m", "propdex.prefect_runtime.server", str(port)],
                            env=server_environment(), stdin=subprocess.PIPE)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


class EphemeralApi:
    """An ephemeral Prefect API, launched at once and waited for in a background thread;
    ``url()`` waits for it.

    ``url()`` is None when a server is configured (or ephemeral mode is off): Prefect then
    connects as it always does."""

    def __init__(self) -> None:
        self._url: str | None = None
        self._error: BaseException | None = None
        self._process: subprocess.Popen | None = None
        self._launched_url = ""
        self._timeout = 0.0
        atexit.register(self.stop)  # like Prefect's own ephemeral server: it ends with the CLI
        # The server is launched here and only waited for in the thread: launched from the
        # thread, it would start only once the thread's settings import got the GIL and the
        # import lock, behind the caller's imports (the flow's modules), and the server's
        # start-up is the first run's critical path. Whether a configured server makes it
        # unneeded, the server process decides (it exits with NOT_NEEDED).
        launched: float | None = time.monotonic()
        try:
            self._launch_on_free_port()
        except BaseException as exc:  # re-raised in the caller's thread by url()
            self._error, launched = exc, None
        self._thread = threading.Thread(target=self._wait, args=(launched,),
                                        name="propdex-prefect-api", daemon=True)
        self._thread.start()

    def _launch_on_free_port(self) -> None:
        port = _free_port()
        self._launched_url = f"http://127.0.0.1:{port}/api"
        self._process = launch_server_process(port)

    def _wait(self, launched: float | None) -> None:
        if launched is None or self._process is None:
            return
        try:
            from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

            self._timeout = PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
            deadline = launched + self._timeout
            for attempt in range(_ATTEMPTS):
                if attempt:
                    self._launch_on_free_port()
                while time.monotonic() < deadline and self._process.poll() is None:
                    if _healthy(self._launched_url):
                        self._url = self._launched_url
                        return
                    time.sleep(0.1)
                if self._process.poll() == NOT_NEEDED:  # a configured server is used instead
                    return
                if self._process.poll() == HOME_UNUSABLE:
                    from prefect.settings import get_current_settings

                    prepare_prefect_home(get_current_settings())  # raises, saying why
                if self._process.poll() != _STARTUP_FAILED:
                    break
            code = self._process.poll()
            if code is None:  # it never answered, so it recorded nothing a stop would wait for
                self._process.kill()
                self._process.wait()
            raise PrefectStartError(
                f"Prefect's ephemeral API exited with code {code} while starting" if code is not None
                else f"Prefect's ephemeral API did not answer within {self._timeout} s "
                     "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)"
            )
        except BaseException as exc:  # re-raised in the caller's thread by url()
            self._error = exc

    def url(self) -> str | None:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._url

    def stop(self) -> None:
        """Stop the server once it has recorded what it received (it says so if that takes
        long); a Ctrl-C meanwhile stops it at once."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=_STOP_SECONDS)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):
                self._process.kill()
                self._process.wait()


def start_ephemeral_api() -> EphemeralApi | None:
    """Start Prefect's ephemeral API now, unless ``PREFECT_API_URL`` is set in the environment
    or Prefect is already imported (a process that already ran flows has its own API)."""
    if os.environ.get("PREFECT_API_URL") or "prefect" in sys.modules:
        return None
    return EphemeralApi()


@contextmanager
def using_api(api: EphemeralApi | None) -> Iterator[None]:
    """Flow runs inside report to ``api`` once it is up (or to the configured server)."""
    url = api.url() if api is not None else None
    if url is None:
        yield
        return
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    # The environment too: Dask workers and other subprocesses inherit it.
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    # No flow-run heartbeats: they let a server mark a run crashed when its process died
    # unnoticed, and this API ends with the process. Prefect's heartbeat thread sleeps in
    # one-second steps, which the end of every flow run waits for with both cores idle.
    # (The variable cannot say "none": it accepts only integers of 30 or more.)
    try:
        with temporary_settings(updates={PREFECT_API_URL: url,
                                         PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
