"""A run cancelled from the Prefect UI (SIGTERM from its runner, SIGKILL after the grace period)
stops its work in flight: extraction workers end, busy or orphaned, the requests in flight to
the LLM and embedding servers are cut, and no new one starts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from propdex.chunking.llm_requests import ChunkingRequests
from propdex.embed.openai_embed import OpenAIEmbedder
from propdex.errors import ExtractionError, RunStoppedError
from propdex.extract.isolated import extract_isolated, stop_workers
from propdex.llm.openai_backend import OpenAIBackend
from propdex.settings import Settings
from propdex.stopping import allow_run_work, stop_run_work
from tests.pdf_factory import make_pdf
from tests.scripted_fixtures import scripted_settings
from tests.scripted_server import EMBEDDINGS_PATH, delayed

REPO = Path(__file__).resolve().parents[1]
PAGE = "Herons nest in tall trees near water. They eat fish, frogs and insects. " * 40
PROMPT_END_SECONDS = 5  # a stopped worker ends within this; its document takes 10 s or more
HOLD_MS = 60_000  # how long the server holds a request that the stop cuts
HELD_TIMEOUT = 2 * HOLD_MS / 1000  # the LLM timeout: it does not end the held request either
CUT_SECONDS = 2  # a request in flight fails within this once the run stops


@pytest.fixture(scope="module")
def long_pdf(tmp_path_factory) -> Path:
    # Forty pages through the layout engine: ten seconds or more of one worker's time.
    return make_pdf(tmp_path_factory.mktemp("long") / "long.pdf", [PAGE] * 40)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # an orphan's zombie waits for a reaper that may never come


def _seconds_until_gone(pid: int, limit: float) -> float:
    started = time.monotonic()
    while _alive(pid) and time.monotonic() - started < limit:
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_a_worker_whose_parent_was_killed_mid_document_ends_at_once(long_pdf):
    # As the runner's SIGKILL leaves them: the parent gone, the worker mid-document.
    parent = textwrap.dedent("""
        import os, sys, time
        from propdex.extract.isolated import _Worker
        from propdex.extract.options import extraction_settings
        from propdex.settings import Settings
        worker = _Worker((2048, 1))
        worker.requests.send((sys.argv[1], extraction_settings(Settings(pdf_reader="layout"))))
        print(worker.process.pid, flush=True)
        time.sleep(1)
        os._exit(0)
    """)
    # The worker inherits stderr: capturing it would wait for the worker to end.
    launcher = subprocess.Popen([sys.executable, "-c", parent, str(long_pdf)], text=True, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, PYTHONPATH=str(REPO)))
    worker = int(launcher.stdout.readline())
    launcher.wait(60)

    seconds = _seconds_until_gone(worker, 60)
    if _alive(worker):
        os.kill(worker, 9)
    assert seconds < PROMPT_END_SECONDS


def test_stopping_the_workers_ends_a_busy_extraction_as_a_crash(long_pdf):
    outcome: list[BaseException] = []

    def extract() -> None:
        try:
            extract_isolated(long_pdf, Settings(pdf_reader="layout"))
        except ExtractionError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=extract)
    thread.start()
    time.sleep(2)  # the worker has the document
    stop_workers()
    started = time.monotonic()
    thread.join(60)

    assert ("extraction crashed (killed by SIGKILL)", True) == (
        outcome[0].reason, time.monotonic() - started < PROMPT_END_SECONDS)


def test_no_extraction_worker_starts_once_the_run_is_stopped(long_pdf):
    stop_run_work()
    try:
        with pytest.raises(RunStoppedError):
            extract_isolated(long_pdf, Settings(pdf_reader="layout"))
    finally:
        allow_run_work()


def test_a_document_waiting_for_a_slot_when_the_run_stops_is_not_extracted(long_pdf):
    # One slot: the second document waits for it. Killing the first one's worker frees the
    # slot; on a stop the second must not start a worker, which no SIGTERM would reach.
    settings = Settings(pdf_reader="layout", extract_workers=1)
    outcomes: dict[str, type[BaseException]] = {}

    def extract(name: str) -> None:
        try:
            extract_isolated(long_pdf, settings)
        except (ExtractionError, RunStoppedError) as exc:
            outcomes[name] = type(exc)

    threads = [threading.Thread(target=extract, args=(name,)) for name in ("first", "second")]
    threads[0].start()
    time.sleep(2)  # the first document has the slot and a worker
    threads[1].start()
    time.sleep(0.5)  # the second waits for the slot
    stop_run_work()
    started = time.monotonic()
    try:
        for thread in threads:
            thread.join(60)
    finally:
        allow_run_work()

    assert ({"first": ExtractionError, "second": RunStoppedError}, True) == (
        outcomes, time.monotonic() - started < PROMPT_END_SECONDS)


def test_no_llm_request_starts_once_the_run_is_stopped(scripted_server):
    backend = OpenAIBackend(scripted_settings(scripted_server))
    stop_run_work()
    try:
        with pytest.raises(RunStoppedError):
            backend.title("The Eiffel Tower is in Paris.", truncated=False, hint=None)
    finally:
        allow_run_work()
        backend.close()
    assert [] == scripted_server.requests


REQUESTS = {
    "embeddings": lambda settings: OpenAIEmbedder(settings).embed(["Herons nest in tall trees."]),
    "llm-chunking": lambda settings: ChunkingRequests(settings).copy(
        [{"role": "user", "content": "Herons nest in tall trees."}], 26),
}


@pytest.mark.parametrize("request_of", REQUESTS.values(), ids=REQUESTS.keys())
def test_no_other_request_to_the_server_starts_once_the_run_is_stopped(scripted_server,
                                                                        request_of):
    stop_run_work()
    try:
        with pytest.raises(RunStoppedError):
            request_of(scripted_settings(scripted_server))
    finally:
        allow_run_work()
    assert [] == scripted_server.requests


def test_a_new_run_sends_llm_requests_again(scripted_server):
    backend = OpenAIBackend(scripted_settings(scripted_server))
    stop_run_work()
    allow_run_work()
    try:
        backend.title("The Eiffel Tower is in Paris.", truncated=False, hint=None)
    finally:
        backend.close()
    assert 1 == scripted_server.calls("title")


def _stopped_mid_request(server, request_of) -> tuple[BaseException | None, float]:
    """Stop the run from this thread while ``request_of`` (run in another) is held by the
    server: what it raised, and how long after the stop."""
    outcome: list[BaseException | None] = []

    def send() -> None:
        try:
            request_of(scripted_settings(server, llm_timeout=HELD_TIMEOUT))
            outcome.append(None)
        except Exception as exc:
            outcome.append(exc)

    server.script(delayed(HOLD_MS))
    thread = threading.Thread(target=send)
    thread.start()
    while not server.requests and thread.is_alive():
        time.sleep(0.01)
    time.sleep(0.2)  # the request waits for its answer
    stop_run_work()
    try:
        started = time.monotonic()
        thread.join(HELD_TIMEOUT)
        return outcome[0], time.monotonic() - started
    finally:
        allow_run_work()


IN_FLIGHT = {
    "chat": lambda settings: OpenAIBackend(settings).title(
        "The Eiffel Tower is in Paris.", truncated=False, hint=None),
    **REQUESTS,
}


@pytest.mark.parametrize("request_of", IN_FLIGHT.values(), ids=IN_FLIGHT.keys())
def test_a_request_in_flight_is_cut_when_the_run_stops_and_not_retried(scripted_server, request_of):
    error, seconds = _stopped_mid_request(scripted_server, request_of)

    assert (RunStoppedError, True, 1) == (type(error), seconds < CUT_SECONDS, len(scripted_server.requests))


def test_a_cut_request_leaves_no_connection_to_the_server(scripted_server):
    import psutil

    _stopped_mid_request(scripted_server, REQUESTS["embeddings"])
    port = int(scripted_server.url.rsplit(":", 1)[1])

    assert [] == [c for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port]


def test_an_idle_connection_the_stop_cut_is_replaced_at_the_next_request(scripted_server):
    embed, settings = REQUESTS["embeddings"], scripted_settings(scripted_server)
    embed(settings)  # its connection stays in the client's pool
    stop_run_work()
    allow_run_work()

    embed(settings)

    assert (2, 2) == (scripted_server.calls(path=EMBEDDINGS_PATH), scripted_server.connections_opened)


def test_a_read_of_the_servers_context_window_in_flight_is_cut_when_the_run_stops():
    from propdex.llm.context_window import read_context_windows

    outcome: list[BaseException] = []

    def read(url: str) -> None:
        try:
            read_context_windows(url, "no-key", HELD_TIMEOUT)
        except RunStoppedError as exc:
            outcome.append(exc)

    # A listening socket that never accepts: the connection opens, the request waits.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        thread = threading.Thread(target=read, args=(f"http://127.0.0.1:{silent.getsockname()[1]}/v1",))
        thread.start()
        time.sleep(0.5)
        stop_run_work()
        try:
            started = time.monotonic()
            thread.join(HELD_TIMEOUT)
            seconds = time.monotonic() - started
        finally:
            allow_run_work()

    assert (1, True) == (len(outcome), seconds < CUT_SECONDS)
