"""The Prefect API a CLI ingest reports to, started early so start-up overlaps other work.

Without ``PREFECT_API_URL``, Prefect starts its ephemeral API in a subprocess the moment the
flow first asks for a client, and waits for it: importing the server (also into the CLI's own
process, for ``SubprocessASGIServer``), migrating a new database and registering block types
take most of a first run. Launching the same subprocess as soon as the CLI knows a flow run is
coming lets that work run on the other core while the CLI imports the flow and loads the
model, and a new Prefect home gets a database already migrated (propdex.prefect_template), so
the server skips Prefect's migrations. A configured server (``PREFECT_API_URL`` in the
environment, a profile or prefect.toml) is used as it is.
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
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from propdex.errors import PrefectStartError
from propdex.prefect_template import (
    at_installed_head, default_sqlite_database, place_migrated_database,
)

if TYPE_CHECKING:
    from prefect.settings import Settings

# uvicorn's exit code when start-up fails, e.g. because another process took the port since
# it was chosen: Prefect's own launcher tries again on a new port, and so does this one.
_STARTUP_FAILED = 3
_ATTEMPTS = 3


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare_prefect_home(settings: Settings) -> bool:
    """Create Prefect's home (``settings``: Prefect's) and, when the server's database there
    is Prefect's default and does not exist yet, place it already migrated: the server's
    migration step is then a no-op instead of 114 migrations (~4.4 s of CPU) on its critical
    path. Returns whether that database is at the installed Prefect's head revision."""
    # The server's SQLite database lives in PREFECT_HOME, which Prefect creates when the flow
    # side first imports it: possibly after the server has tried to open the database.
    try:
        settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise PrefectStartError(
            f"cannot create Prefect's home {settings.home} (PREFECT_HOME): {exc.strerror or exc}"
        ) from exc
    database = default_sqlite_database(settings)
    if database is None:
        return False
    place_migrated_database(database)
    return at_installed_head(database)


def server_environment(settings: Settings) -> dict[str, str]:
    """The ephemeral server's environment, after preparing its home (``settings``: Prefect's)."""
    at_head = prepare_prefect_home(settings)
    return {
        # A database at the installed Prefect's head revision has nothing to migrate: the
        # server would still spend ~0.5 s on Alembic finding that out, on every run.
        **({"PREFECT_SERVER_DATABASE_MIGRATE_ON_START": "false"} if at_head else {}),
        # Registering Prefect's block types in a new database costs ~1.5 s of CPU on the
        # server's critical path; a CLI flow run uses no block. A full `prefect server start`
        # registers them when it first runs. An explicit setting is kept.
        "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
        **os.environ,
        # Settings given in this process (profile, prefect.toml) reach the server as Prefect
        # passes them to its own subprocess.
        **settings.to_environment_variables(exclude_unset=True),
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
    }


def _launch(port: int) -> subprocess.Popen:
    """Prefect's own ephemeral server command (prefect.server.api.server.SubprocessASGIServer):
    the API without the UI, running only the services an ephemeral server runs."""
    import prefect
    from prefect.settings import get_current_settings

    env = server_environment(get_current_settings())
    command = [
        sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
        "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
        "--port", str(port), "--log-level", "error", "--lifespan", "on",
    ]
    return subprocess.Popen(command, env=env)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


class EphemeralApi:
    """An ephemeral Prefect API starting in a background thread; ``url()`` waits for it.

    ``url()`` is None when a server is configured (or ephemeral mode is off): Prefect then
    connects as it always does."""

    def __init__(self) -> None:
        self._url: str | None = None
        self._error: BaseException | None = None
        self._process: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._start, name="propdex-prefect-api", daemon=True)
        atexit.register(self.stop)  # like Prefect's own ephemeral server: it ends with the CLI
        self._thread.start()

    def _start(self) -> None:
        try:
            from prefect.settings import (
                PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED,
                PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
            )

            if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
                return
            timeout = PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
            deadline = time.monotonic() + timeout
            for _ in range(_ATTEMPTS):
                port = _free_port()
                url = f"http://127.0.0.1:{port}/api"
                self._process = _launch(port)
                while time.monotonic() < deadline and self._process.poll() is None:
                    if _healthy(url):
                        self._url = url
                        return
                    time.sleep(0.1)
                if self._process.poll() != _STARTUP_FAILED:
                    break
            code = self._process.poll()
            self.stop()
            raise PrefectStartError(
                f"Prefect's ephemeral API exited with code {code} while starting" if code is not None
                else f"Prefect's ephemeral API did not answer within {timeout} s "
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
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()


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
    from prefect.settings import PREFECT_API_URL, temporary_settings

    # The environment too: Dask workers and other subprocesses inherit it.
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
