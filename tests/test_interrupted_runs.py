"""An ingest the user interrupts: Ctrl-C (SIGINT to the whole process group) or SIGKILL of
the CLI alone. The CLI says it was interrupted, no traceback reaches the user, no process it
started outlives it, and the next run finishes the work."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from propdex.cli import main
from propdex.store import Index
from tests.pdf_factory import make_pdf
from tests.scripted_fixtures import scripted_environment
from tests.scripted_server import Action, ScriptedServer, delayed

pytestmark = [pytest.mark.prefect,
              pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")]

REPO = Path(__file__).resolve().parents[1]


def _session_processes(session: int) -> set[int]:
    """Live (not zombie) processes of ``session``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def _wait_until_gone(session: int, seconds: float = 60) -> set[int]:
    deadline = time.monotonic() + seconds
    while (left := _session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_the_prefect_server_ends_with_the_process_that_launched_it(tmp_path):
    # SIGKILL gives the launcher no chance to stop it: the server notices its stdin closing.
    script = textwrap.dedent("""
        import sys, time, urllib.request
        from propdex.prefect_runtime.api import _free_port, launch_server_process
        port = _free_port()
        server = launch_server_process(port)
        for _ in range(1200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health").close()
                break
            except OSError:
                time.sleep(0.1)
        print(server.pid, flush=True)
        time.sleep(600)
    """)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    launcher = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, text=True,
                                stdout=subprocess.PIPE, start_new_session=True,
                                env={**env, "PYTHONPATH": str(REPO), "PREFECT_HOME": str(tmp_path)})
    try:
        server = int(launcher.stdout.readline())
    finally:
        launcher.kill()
        launcher.wait()

    assert server not in _wait_until_gone(launcher.pid)  # the launcher's session


# What the Ctrl-C test guards against is a run that waits for the request it has in flight
# (the server holds it 600 s, the LLM timeout is longer still). Ctrl-C cuts it: the main
# thread's handler shuts its connection down, little work, so the cut gets a tight bound,
# measured where it happens (the server sees the client hang up). Ending the run after that
# is CPU work that grows with the host's load (Prefect's API records the run's states and
# drains its services, up to its 120 s limit): a few seconds on an idle host, over 20 s at a
# load of 15 on 2 cores. So the exit gets a bound far below the held request's 600 s and
# half the drain's limit.
INTERRUPTED_CUT_SECONDS = 10
INTERRUPTED_EXIT_SECONDS = 60


def _propositions_bodies(server: ScriptedServer) -> list[str]:
    return [str(r.body) for r in server.requests if r.step == "propositions"]


def test_ctrl_c_mid_request_exits_at_once_and_the_next_run_resumes_there(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    page = ("Herons nest in tall trees near water. They eat fish, frogs and insects. "
            "A heron stands still in shallow water and strikes fast. ") * 6
    for n in range(3):
        make_pdf(src / f"herons{n}.pdf", [f"Heron report {n}. {page}", page, page])
    db = tmp_path / "db"
    with ScriptedServer(latency_ms=50) as server:
        # The fifth propositions request is held far past Ctrl-C (the LLM timeout longer
        # still): the run cannot get past it, so Ctrl-C lands while it is in flight however
        # slowly this test's process is scheduled beside the run.
        server.script(*[Action()] * 4, delayed(600_000), step="propositions")
        env = dict(os.environ, **{**scripted_environment(server), "PROPDEX_LLM_TIMEOUT": "900"},
                   PROPDEX_LLM_CONCURRENCY="1", PROPDEX_DOCUMENT_CONCURRENCY="1",
                   PROPDEX_CACHE_DIR=str(tmp_path / "cache"))
        command = [sys.executable, "-m", "propdex.cli", "ingest", str(src), "--db", str(db)]
        run = subprocess.Popen(command, env=env, cwd=REPO, start_new_session=True, text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and run.poll() is None and server.calls("propositions") < 5:
            time.sleep(0.1)
        assert run.poll() is None, f"the run ended before Ctrl-C: {run.stderr.read()!r}"
        time.sleep(0.5)  # the request waits for its answer
        interrupted = time.monotonic()  # before: the cut may come before this thread runs again
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        err = run.stderr.read()
        code = run.wait(timeout=2 * INTERRUPTED_EXIT_SECONDS)
        seconds = time.monotonic() - interrupted
        left = _wait_until_gone(run.pid)
        *answered, cut = _propositions_bodies(server)
        [hung_up] = [r.hung_up for r in server.requests if str(r.body) == cut]
        committed = Index.open(str(db), create=False).documents() if db.exists() else []

        finished = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                                  timeout=600)
        sent_next = _propositions_bodies(server)[len(answered) + 1:]

    assert (130, "propdex: interrupted") == (code, err.strip().splitlines()[-1]), err
    assert "KeyboardInterrupt" not in err
    assert set() == left
    assert (True, True) == (hung_up is not None and hung_up - interrupted < INTERRUPTED_CUT_SECONDS,
                            seconds < INTERRUPTED_EXIT_SECONDS), (hung_up, interrupted, seconds)
    cut_document = "herons{}.pdf".format(re.search(r"Title: Heron report (\d)", cut)[1])
    assert [] == [d["source"] for d in committed if d["source"].endswith(cut_document)]
    # The cut request went once (no retry), and goes again in the next run, the answered
    # ones coming from the cache.
    assert (4, True, []) == (len(answered), cut in sent_next, [b for b in sent_next if b in answered])
    assert 0 == finished.returncode, finished.stderr
    assert [] == Index.open(str(db), create=False).verify()


def _immutable(folder: Path, on: bool) -> None:
    """chattr +i (or -i) on ``folder`` and the folders below it: no file can be created or
    removed there, not even by root."""
    for path in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
        subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True,
                       capture_output=True)


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(args))
    return code, out.getvalue()


def test_verify_after_a_commit_cut_short_reports_leftovers_and_exits_0(tmp_path):
    """A run whose commit step never happened: its new rows are appended, then writing the
    documents row fails (the table's folders are made immutable, a failure no retry gets
    past), which leaves the state a SIGKILL between the two steps leaves."""
    note = tmp_path / "src" / "herons.md"
    note.parent.mkdir()
    note.write_text("# Herons\n\nHerons nest in tall trees near water.\n", encoding="utf-8")
    db = tmp_path / "db"
    assert 0 == _cli("ingest", str(note.parent), "--db", str(db))[0]
    note.write_text("# Herons\n\nHerons eat fish, frogs and insects.\n", encoding="utf-8")
    try:
        _immutable(db / "documents.lance", True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"chattr +i is not available here (needs CAP_LINUX_IMMUTABLE): {exc}")
    try:
        cut_short = _cli("ingest", str(note.parent), "--db", str(db))[0]
    finally:
        _immutable(db / "documents.lance", False)
    index = Index.open(str(db), create=False)
    [committed] = {d["run_id"] for d in index.documents()}
    [left_by] = {r["run_id"] for r in index.read("chunks", ["run_id"])} - {committed}

    code, out = _cli("verify", "--db", str(db))
    *leftover, last = out.splitlines()
    assert 0 == _cli("ingest", str(note.parent), "--db", str(db))[0]
    after = _cli("verify", "--db", str(db))

    assert (4, 0) == (cut_short, code), out
    assert ([True], [True]) == ([line.startswith(f"leftover: run {left_by} left ") for line in leftover],
                                [line.endswith("the next ingest removes them") for line in leftover])
    assert "index consistent (1 interrupted run(s) left rows the next ingest removes)" == last
    assert (0, "index consistent\n") == after


# The CLI, with the ingest flow given a Prefect on_completion hook (Prefect runs it in the
# main thread once the run's Completed state is recorded) that acts like Ctrl-C at a moment
# a test picks: there, in an exit handler, or from a thread once the process is ending. The
# hook is added as flows.ingest is imported, where the CLI imports it: imported before, it
# would bring Prefect in early, and the CLI would leave its API to Prefect.
CLI_WITH_CTRL_C = textwrap.dedent("""
    import atexit, importlib.machinery, os, signal, sys, threading, time
    from propdex.cli.main import run

    def ctrl_c():
        os.kill(os.getpid(), signal.SIGINT)

    def ctrl_c_until_ended():
        threading.main_thread().join()  # returns once the interpreter is ending
        while True:
            ctrl_c()
            time.sleep(0.2)

    def hook(flow, flow_run, state):
        when = os.environ["CTRL_C_WHEN"]
        if when == "completed":
            ctrl_c()
        elif when == "exit handler":
            atexit.register(ctrl_c)  # registered last: the first exit handler run
        elif when == "exit handler, then a long stop":  # as Prefect's API recording its last states
            atexit.register(time.sleep, 600)
            atexit.register(ctrl_c)
        else:  # "ending, repeatedly": a thread that would keep the process from ending
            threading.Thread(target=ctrl_c_until_ended).start()

    class WithHook(importlib.machinery.PathFinder):
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name != "flows.ingest":
                return None
            spec = super().find_spec(name, path, target)
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                module.ingest = module.ingest.with_options(on_completion=[hook])

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, WithHook)
    sys.argv[0] = "propdex"
    run()
""")


def _ingest_with_ctrl_c(tmp_path: Path, when: str) -> subprocess.CompletedProcess:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("herons", "otters"):
        (src / f"{name}.md").write_text(
            f"# {name.title()}\n\n{name.title()} live near rivers. They eat fish they catch "
            "in shallow water. Their young stay with them for a year.\n", encoding="utf-8")
    with ScriptedServer() as server:
        env = dict(os.environ, **scripted_environment(server), CTRL_C_WHEN=when,
                   PYTHONPATH=str(REPO), PROPDEX_CACHE_DIR=str(tmp_path / "cache"))
        return subprocess.run(
            [sys.executable, "-c", CLI_WITH_CTRL_C, "ingest", str(src), "--db", str(tmp_path / "db")],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


# Each moment, and why the exit code would not be 130 without the CLI's handling of it.
@pytest.mark.parametrize("when", [
    "completed",  # Prefect drops a KeyboardInterrupt raised once the run's final state is recorded
    "exit handler, then a long stop",  # the exit handler after it would hold the process for 600 s
    "ending, repeatedly",  # the thread sending it would keep the process from ending
])
def test_ctrl_c_at_the_end_of_a_run_is_reported(tmp_path, when):
    done = _ingest_with_ctrl_c(tmp_path, when)

    assert (130, "propdex: interrupted") == (done.returncode, done.stderr.strip().splitlines()[-1]), done.stderr


def test_ctrl_c_in_an_exit_handler_is_reported_without_a_traceback(tmp_path):
    done = _ingest_with_ctrl_c(tmp_path, "exit handler")

    assert (130, "propdex: interrupted") == (done.returncode, done.stderr.strip().splitlines()[-1]), done.stderr
    assert "Traceback" not in done.stderr
