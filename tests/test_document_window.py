"""Documents at once (document_concurrency: --document-concurrency, the run form's "Documents
at once", PROPDEX_DOCUMENT_CONCURRENCY): at most that many documents' chains of tasks are in
flight, on threads and on Dask, and a cancelled run submits no further document.

Which documents were in flight together is read from the scripted server's request log: each
note names its own bird in every sentence, so every LLM request names one document, and a
document is open from its first request to its last. Runs that could hang are guarded: a run
in this process by faulthandler (every thread's traceback, then the process ends), a run in a
child process by a timeout (the child's tracebacks, then it is killed).
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.runners import STAGES_PER_DOCUMENT, task_runner_for
from propdex.extract.isolated import for_documents
from propdex.settings import Settings
from tests.cli_capture import run_cli
from tests.scripted_fixtures import scripted_environment
from tests.scripted_server import CHAT_PATH, ScriptedServer, delayed

pytestmark = pytest.mark.prefect

REPO = Path(__file__).resolve().parents[1]
BIRDS = ("heron", "egret", "stork", "crane", "ibis", "plover")
GUARD_SECONDS = 180  # a run of these notes takes seconds; a hang fails the test at this
DASK_GUARD_SECONDS = 300
LATENCY_MS = 20  # long enough for the LLM requests of documents in flight to overlap


def write_notes(folder: Path, birds: tuple[str, ...] = BIRDS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for bird in birds:
        (folder / f"{bird}.md").write_text(
            f"# The {bird}\n\nThe {bird} nests near water. The {bird} eats small fish. "
            f"Every {bird} lays eggs in spring.\n", encoding="utf-8")
    return folder


def most_documents_open(server: ScriptedServer) -> int:
    """The most documents open at once, a document open from its first LLM request to its
    last (in arrival order)."""
    names = [next(bird for bird in BIRDS if bird in json.dumps(r.body))
             for r in server.requests if r.path == CHAT_PATH]
    first = {name: names.index(name) for name in names}
    last = {name: len(names) - 1 - names[::-1].index(name) for name in names}
    return max(sum(first[name] <= at <= last[name] for name in first)
               for at in range(len(names)))


@pytest.fixture
def guarded() -> Iterator[None]:
    """A run in this process that hangs dumps every thread's traceback and ends the process
    (the test fails at once rather than at CI's time limit)."""
    faulthandler.dump_traceback_later(GUARD_SECONDS, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def scripted(monkeypatch) -> Iterator[ScriptedServer]:
    with ScriptedServer(latency_ms=LATENCY_MS) as server:
        for name, value in scripted_environment(server).items():
            monkeypatch.setenv(name, value)
        yield server


def run_guarded(command: list[str], env: dict[str, str], *,
                timeout: float = GUARD_SECONDS) -> subprocess.CompletedProcess:
    """Run a child process; one still running after ``timeout`` prints every thread's
    traceback (faulthandler on SIGABRT) into the failure message and is killed."""
    child = subprocess.Popen(command, env={**env, "PYTHONFAULTHANDLER": "1"}, cwd=REPO,
                             start_new_session=True, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        ended = child.poll() is not None  # then what it started holds its pipes open
        if not ended:
            child.send_signal(signal.SIGABRT)
        try:
            out, err = child.communicate(timeout=1 if ended else 30)
        except subprocess.TimeoutExpired:  # its pipes are read to their end once all is killed
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # what it started (Prefect's API, workers)
        pytest.fail(f"{command} " + (f"ended, but what it started still held its output after "
                                     f"{timeout} s" if ended else f"still ran after {timeout} s")
                    + f":\n{err[-20000:]}")
    return subprocess.CompletedProcess(command, child.returncode, out, err)


# Threads -----------------------------------------------------------------------------------
def test_one_document_at_a_time_from_the_run_form_field(scripted, guarded, tmp_path):
    from flows.ingest import ingest
    from flows.parameters import IngestOptions

    ingest(sources=[str(write_notes(tmp_path / "notes", BIRDS[:4]))], db=str(tmp_path / "db"),
           options=IngestOptions(document_concurrency=1))
    assert 1 == most_documents_open(scripted)


def test_two_documents_at_most_from_the_flag(scripted, guarded, tmp_path):
    code, out, err = run_cli("ingest", str(write_notes(tmp_path / "notes")), "--db",
                             str(tmp_path / "db"), "--document-concurrency", "2")
    assert (0, 2) == (code, most_documents_open(scripted)), err


def test_one_document_at_a_time_from_the_variable(scripted, guarded, monkeypatch, tmp_path):
    from flows.ingest import ingest

    monkeypatch.setenv("PROPDEX_DOCUMENT_CONCURRENCY", "1")
    ingest(sources=[str(write_notes(tmp_path / "notes", BIRDS[:3]))], db=str(tmp_path / "db"))
    assert 1 == most_documents_open(scripted)


def test_the_flag_reaches_the_runs_options():
    from propdex.cli.main import build_parser, ingest_options

    args = build_parser().parse_args(["ingest", "docs", "--document-concurrency", "3"])
    assert 3 == ingest_options(args).document_concurrency


def test_the_thread_pool_holds_every_stage_of_the_documents_at_once():
    runner = task_runner_for(Settings(document_concurrency=3))
    assert 3 * STAGES_PER_DOCUMENT == runner._max_workers


def test_no_more_extraction_slots_than_documents_at_once():
    settings = Settings(extract_workers=4, document_concurrency=2)
    assert 2 == for_documents(settings, 10).extract_workers


# Cancel ------------------------------------------------------------------------------------
# The CLI in a child process, then the documents whose stages started there (the stage timer
# records each stage a task entered, until the document's commit takes them).
CLI_THEN_STARTED = textwrap.dedent("""
    import json, sys
    from propdex.cli.main import main
    from propdex.ids import doc_id_for
    from propdex.pipeline.timing import pop_stage_seconds

    code = main(sys.argv[2:])
    started = [path for path in json.loads(sys.argv[1]) if pop_stage_seconds(doc_id_for(path))]
    print(json.dumps({"code": code, "started": started}))
""")


def test_ctrl_c_submits_no_further_document(tmp_path):
    notes = write_notes(tmp_path / "notes", BIRDS[:3])
    paths = sorted(str(path) for path in notes.iterdir())
    with ScriptedServer() as server:
        server.script(delayed(600_000))  # the first request is held: the run cannot end first
        env = dict(os.environ, **{**scripted_environment(server), "PROPDEX_LLM_TIMEOUT": "900"},
                   PROPDEX_CACHE_DIR=str(tmp_path / "cache"))
        command = [sys.executable, "-c", CLI_THEN_STARTED, json.dumps(paths), "ingest",
                   str(notes), "--db", str(tmp_path / "db"), "--document-concurrency", "1"]
        child = subprocess.Popen(command, env=env, cwd=REPO, start_new_session=True, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + GUARD_SECONDS
        while time.monotonic() < deadline and child.poll() is None and not server.requests:
            time.sleep(0.05)
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        try:
            out, err = child.communicate(timeout=GUARD_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            pytest.fail("the interrupted run did not end")
    result = json.loads(out.strip().splitlines()[-1])
    assert {"code": 130, "started": paths[:1]} == result, err


# Dask --------------------------------------------------------------------------------------
@pytest.mark.skipif(importlib.util.find_spec("prefect_dask") is None,
                    reason="prefect-dask is not installed: pip install 'propdex[dask]'")
def test_a_local_dask_run_takes_one_document_at_a_time(tmp_path):
    notes = write_notes(tmp_path / "notes", BIRDS[:3])
    with ScriptedServer(latency_ms=LATENCY_MS) as server:
        env = dict(os.environ, **scripted_environment(server), PROPDEX_DASK_WORKERS="1",
                   PROPDEX_CACHE_DIR=str(tmp_path / "cache"))
        # A cluster's start-up (worker processes importing propdex and Prefect) is slow on a
        # busy host: 40 s alone, 100 s at a load of 12 on two cores.
        done = run_guarded([sys.executable, "-m", "propdex.cli", "ingest", str(notes), "--db",
                            str(tmp_path / "db"), "--dask", "--document-concurrency", "1"], env,
                           timeout=DASK_GUARD_SECONDS)
        assert (0, 1) == (done.returncode, most_documents_open(server)), done.stderr[-5000:]
