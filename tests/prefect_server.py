"""Real processes for the deployment tests: a Prefect server, a worker, PostgreSQL.

Each process runs in its own session (process group) with its output in a log file, so
stopping it stops its children too (a worker's flow-run subprocesses, the server's
services) and a failure can show what the process printed.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx

REPOSITORY = Path(__file__).resolve().parents[1]
SERVER_START_SECONDS = 180  # 15-25 s on two busy cores; a cold start with migrations takes longer
T = TypeVar("T")


class ProcessFailedError(RuntimeError):
    """A helper process exited early or a command failed; the message holds its output."""


class WaitTimeoutError(TimeoutError):
    """A condition did not become true in time."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise ProcessFailedError(
                f"{self.name} exited with {self.popen.returncode}:\n{log_tail(self.log)}")


def start_process(name: str, args: list[str], env: dict[str, str], log: Path,
                  cwd: Path | None = None) -> Process:
    with open(log, "ab") as out:
        popen = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
    return Process(name, popen, log)


def stop_process(process: Process, first_signal: int = signal.SIGTERM, grace: float = 20) -> None:
    """Signal the whole process group, then kill whatever is left of it after ``grace``."""
    pgid = process.popen.pid  # start_new_session: the group id is the leader's pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, first_signal)
    try:
        process.popen.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    # Children (flow runs, uvicorn, postgres backends) may outlive the leader.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.popen.wait(timeout=10)


def wait_for(condition: Callable[[], T | None], *, timeout: float, what: str,
              interval: float = 1.0, alive: Callable[[], None] | None = None) -> T:
    """Poll ``condition`` until it returns a truthy value; ``alive`` raises if a process died."""
    deadline = time.monotonic() + timeout
    while True:
        if alive:
            alive()
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def prefect_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "prefect", *args]


def run_prefect(args: list[str], env: dict[str, str], cwd: Path = REPOSITORY,
                timeout: float = 300) -> str:
    done = subprocess.run(prefect_command(*args), env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise ProcessFailedError(
            f"prefect {' '.join(args)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def prefect_environment(home: Path, port: int, database_url: str | None = None) -> dict[str, str]:
    """Environment for the server, CLI, worker and flow runs of one test stack."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "PROPDEX_"))}  # nothing from the caller's profile
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
        PREFECT_SERVER_API_HOST="127.0.0.1",
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_ENABLED="false",
        PREFECT_CLI_PROMPT="false",
        PREFECT_LOGGING_LEVEL="INFO",
        # Pick up runs within ~2 s instead of the default 10 s polling interval.
        PREFECT_WORKER_QUERY_SECONDS="2",
        # A schedule added to an existing deployment waits for the main scheduler loop
        # (60 s by default): only new or updated deployments are scheduled at once.
        PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="5",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    if database_url:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    return env


def api_healthy(api_url: str) -> bool:
    try:
        return httpx.get(f"{api_url}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class PrefectStack:
    """A `prefect server start` and the environment that talks to it."""

    home: Path
    env: dict[str, str]
    server: Process
    processes: list[Process] = field(default_factory=list)

    @property
    def api_url(self) -> str:
        return self.env["PREFECT_API_URL"]

    def check_alive(self) -> None:
        for process in (self.server, *self.processes):
            process.check_alive()

    def start(self, name: str, args: list[str], cwd: Path = REPOSITORY) -> Process:
        log = self.home / f"{name}.log"
        for number in itertools.count(2):
            if not log.exists():
                break  # a fresh log: waiting for a line never sees an earlier process's output
            log = self.home / f"{name}-{number}.log"
        process = start_process(name, args, self.env, log, cwd)
        self.processes.append(process)
        return process

    def stop(self, process: Process) -> None:
        stop_process(process)
        if process in self.processes:
            self.processes.remove(process)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ({p.log})\n{log_tail(p.log, 40)}"
                         for p in (self.server, *self.processes))


@contextlib.contextmanager
def prefect_server(home: Path, database_url: str | None = None) -> Iterator[PrefectStack]:
    """Run `prefect server start` on a free port on 127.0.0.1 until the block ends; every
    process started through the stack is stopped too, whatever happened."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = prefect_environment(home, port, database_url)
    server = start_process("server", prefect_command("server", "start", "--host", "127.0.0.1",
                                                     "--port", str(port)),
                           env, home / "server.log")
    stack = PrefectStack(home=home, env=env, server=server)
    try:
        wait_for(lambda: api_healthy(stack.api_url), timeout=SERVER_START_SECONDS,
                 what=f"the Prefect server on port {port}", alive=server.check_alive)
        yield stack
    finally:
        for process in reversed(stack.processes):
            stop_process(process)
        stop_process(server)


# PostgreSQL -----------------------------------------------------------------------------

class PostgresUnavailableError(RuntimeError):
    """PostgreSQL is not installed or cannot run here; the message says why."""


def postgres_binaries() -> Path:
    """The folder holding initdb and postgres (Debian keeps them off PATH)."""
    found = shutil.which("initdb")
    if found and Path(found).with_name("postgres").exists():
        return Path(found).resolve().parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "postgres").exists():
            return Path(folder)
    raise PostgresUnavailableError(
        "PostgreSQL server binaries (initdb, postgres) not found; on Debian/Ubuntu: "
        "apt-get install -y postgresql")


def _postgres_user() -> list[str]:
    """PostgreSQL refuses to run as root: run it as the `postgres` account then."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise PostgresUnavailableError(
            "running as root and there is no `postgres` user to run PostgreSQL as") from exc
    runuser = shutil.which("runuser")
    if not runuser:
        raise PostgresUnavailableError("running as root and `runuser` is not installed")
    return [runuser, "-u", "postgres", "--"]


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free port; yields Prefect's connection URL."""
    binaries = postgres_binaries()
    as_user = _postgres_user()
    # Not under pytest's tmp_path: its parents are private to the test user, and the cluster
    # may run as `postgres`.
    data = Path(tempfile.mkdtemp(prefix="propdex-pg-"))
    try:
        if as_user:
            account = pwd.getpwnam("postgres")
            os.chown(data, account.pw_uid, account.pw_gid)
        init = subprocess.run(
            [*as_user, str(binaries / "initdb"), "-D", str(data / "cluster"), "-U", "prefect",
             "--auth=trust", "--encoding=UTF8", "--no-sync"],
            capture_output=True, text=True, timeout=180, cwd=data)
        if init.returncode != 0:
            raise PostgresUnavailableError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
        port = free_port()
        server = start_process(
            "postgres",
            [*as_user, str(binaries / "postgres"), "-D", str(data / "cluster"), "-p", str(port),
             "-h", "127.0.0.1", "-k", str(data), "-c", "fsync=off", "-c", "max_connections=200"],
            {k: v for k, v in os.environ.items() if not k.startswith("PG")}, data / "postgres.log",
            cwd=data)
        try:
            ready = binaries / "pg_isready"
            try:
                wait_for(lambda: subprocess.run(
                    [str(ready), "-h", "127.0.0.1", "-p", str(port), "-U", "prefect"],
                    capture_output=True).returncode == 0,
                    timeout=60, what="PostgreSQL to accept connections", interval=0.5,
                    alive=server.check_alive)
            except ProcessFailedError as exc:
                raise PostgresUnavailableError(str(exc)) from exc
            yield f"postgresql+asyncpg://prefect@127.0.0.1:{port}/postgres"
        finally:
            # SIGINT is PostgreSQL's "fast" shutdown: it does not wait for clients to leave.
            stop_process(server, first_signal=signal.SIGINT)
    finally:
        shutil.rmtree(data, ignore_errors=True)
