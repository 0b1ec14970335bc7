"""The ephemeral Prefect API a CLI run reports to records every task-run state it was sent
before it stops: task runs reach Prefect's database only as events, which its services
handle after the client has moved on, as fast as the host's load lets them."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from propdex.prefect_runtime.api import launch_server_process
from propdex.prefect_runtime.server import drain_events
from tests.test_cli_ingest import write_notes

REPO = Path(__file__).resolve().parents[1]
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "CRASHED"}
# Enough task runs that, without the drain, most of their states are still to record when the
# API stops (about 1 in 10 reached the database); few, since each costs the suite time.
BURST = 40

# A flow of many quick tasks on the process's own API, as the CLI runs it, then the exit that
# stops the API: the events of its last task runs arrive in a burst the server is still
# recording when the process stops it.
MANY_TASKS = textwrap.dedent("""
    import sys
    from propdex.prefect_runtime.api import start_ephemeral_api, using_api
    api = start_ephemeral_api()
    from prefect import flow, task

    @task
    def step(number):
        return number

    @flow
    def many_steps(count):
        return step.map(range(count)).result()

    with using_api(api):
        many_steps(int(sys.argv[1]))
""")


def task_run_states(home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "prefect.db") as db:
        return db.execute("SELECT name, state_type FROM task_run ORDER BY name").fetchall()


def run(args: list[str], home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PREFECT_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("PREFECT_API_URL", None)
    return subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def many_tasks(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    home = tmp_path_factory.mktemp("prefect-home")
    return run([sys.executable, "-c", MANY_TASKS, str(BURST)], home), home


def test_every_task_run_of_a_burst_is_recorded_before_the_api_stops(many_tasks):
    done, home = many_tasks
    assert 0 == done.returncode, done.stderr
    assert [("COMPLETED", BURST)] == _counts(task_run_states(home))


def test_stopping_the_api_after_a_burst_cancels_no_write(many_tasks):
    # A write SQLite refused (a busy host) is logged as "Error flushing" too, then retried:
    # only the shutdown's cancellation of a write loses a state.
    done, _ = many_tasks
    assert [] == cancelled_writes(done.stderr)


def test_every_task_run_of_a_cli_ingest_is_recorded_in_a_final_state(tmp_path):
    folder = write_notes(tmp_path / "notes")
    home = tmp_path / "prefect-home"
    done = run([sys.executable, "-m", "propdex.cli", "ingest", str(folder),
                "--db", str(tmp_path / "db")], home)
    assert 0 == done.returncode, done.stderr
    states = task_run_states(home)
    assert [] == cancelled_writes(done.stderr)
    assert [] == [(name, state) for name, state in states if state not in FINAL_STATES]
    # The flow's last task: its events are the last the server receives.
    assert any(name.startswith("publish-report-") for name, _ in states)


def quiet_events_socket(port: int) -> tuple[socket.socket, object]:
    """A client's events socket on the API at ``port``, authenticated, that reads nothing more:
    its pongs never reach the server, as on a loaded host where the server has not yet read
    the events sent ahead of them."""
    from websockets.client import ClientProtocol
    from websockets.protocol import State
    from websockets.typing import Subprotocol
    from websockets.uri import parse_uri

    protocol = ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/api/events/in"),
                              subprotocols=[Subprotocol("prefect")])
    connection = socket.create_connection(("127.0.0.1", port), timeout=30)
    protocol.send_request(protocol.connect())
    connection.sendall(b"".join(protocol.data_to_send()))
    while protocol.state is State.CONNECTING:
        protocol.receive_data(connection.recv(1 << 16))
    protocol.send_text(b'{"type": "auth", "token": null}')
    connection.sendall(b"".join(protocol.data_to_send()))
    while not [event for event in protocol.events_received() if hasattr(event, "opcode")]:
        protocol.receive_data(connection.recv(1 << 16))  # auth_success
    return connection, protocol


def test_the_api_keeps_an_events_socket_whose_pongs_are_late(tmp_path, monkeypatch):
    # A socket the server closes for a late pong loses every event it has not read yet.
    from prefect.settings import get_current_settings

    # A server with a keepalive would ping at Prefect's interval and, with this timeout, close
    # the socket 1 s later: within the wait below.
    monkeypatch.setenv("PREFECT_SERVER_API_WEBSOCKET_PING_TIMEOUT", "1")
    keepalive = get_current_settings().server.api.websocket_ping_interval + 1
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = launch_server_process(port)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.2)
        connection, protocol = quiet_events_socket(port)
        time.sleep(keepalive + 2)
        connection.setblocking(False)
        try:
            protocol.receive_data(connection.recv(1 << 16))
        except BlockingIOError:  # the server sent nothing
            pass
        assert [] == [frame.opcode.name for frame in protocol.events_received()]
        connection.close()
    finally:
        server.stdin.close()
        server.wait(timeout=60)


class Countdown:
    """A backlog shrinking by one at each look: a service recording slowly but steadily."""

    def __init__(self, backlog: int) -> None:
        self.backlog = backlog

    def counts(self) -> tuple[int, ...]:
        self.backlog = max(0, self.backlog - 1)
        return (self.backlog,)

    def drained(self) -> bool:
        return self.backlog == 0


def test_the_drain_outlasts_the_stall_interval_while_events_keep_being_handled():
    # 20 polls of 20 ms each outlast a 0.05 s stall interval several times over.
    backlog = Countdown(20)
    assert None is drain_events(backlog.drained, backlog.counts, stall_seconds=0.05)
    assert 0 == backlog.backlog


def test_the_drain_gives_up_once_no_event_is_handled_for_the_stall_interval():
    reason = drain_events(lambda: False, lambda: (7, 3), stall_seconds=0.1)
    assert "its services handled no event for 0.1 s" == reason


def test_the_drain_gives_up_at_its_limit_however_steady_the_progress():
    backlog = Countdown(10**9)
    reason = drain_events(backlog.drained, backlog.counts, stall_seconds=0.1, limit_seconds=0.3)
    assert "it was still recording after 0.3 s" == reason


def test_a_long_drain_tells_the_user_once_why_the_cli_has_not_exited():
    backlog, notices = Countdown(15), []
    drain_events(backlog.drained, backlog.counts, notice_seconds=0.05,
                 notice=lambda: notices.append(backlog.backlog))
    assert 1 == len(notices)


def cancelled_writes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CancelledError" in line]


def _counts(states: list[tuple[str, str]]) -> list[tuple[str, int]]:
    kinds = sorted({state for _, state in states})
    return [(kind, sum(1 for _, state in states if state == kind)) for kind in kinds]
