"""A run cancelled from the Prefect UI (SIGTERM from its runner, SIGKILL after the grace period)
stops its work in flight: extraction workers end, busy or orphaned, and no LLM request starts."""

from __future__ import annotations

import os
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

REPO = Path(__file__).resolve().parents[1]
PAGE = "Herons nest in tall trees near water. They eat fish, frogs and insects. " * 40
PROMPT_END_SECONDS = 5  # a stopped worker ends within this; its document takes 10 s or more


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


@pytest.mark.parametrize("request_of", [
    lambda settings: OpenAIEmbedder(settings).embed(["Herons nest in tall trees."]),
    lambda settings: ChunkingRequests(settings).copy(
        [{"role": "user", "content": "Herons nest in tall trees."}], 26),
], ids=["embeddings", "llm-chunking"])
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
