"""An ingest the user interrupts: Ctrl-C (SIGINT to the whole process group) or SIGKILL of
the CLI alone. The CLI says it was interrupted, no traceback reaches the user, no process it
started outlives it, and the next run finishes the work."""

from __future__ import annotations

import contextlib
import io
import os
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


# A known defect, open: on a loaded host (the CI suite on two workers) Ctrl-C mid-run has
# twice ended the CLI with exit 0, once with an AttributeError ("... 'CLOSED'") printed by a
# thread at interpreter shutdown; never in ten runs on a quieter host. Not strict: the test
# still runs and reports XPASS when it passes.
@pytest.mark.xfail(strict=False, reason="Ctrl-C under heavy load can end with exit 0 (cause not found)")
def test_ctrl_c_mid_run_is_reported_and_the_next_run_finishes(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    page = ("Herons nest in tall trees near water. They eat fish, frogs and insects. "
            "A heron stands still in shallow water and strikes fast. ") * 6
    for n in range(3):
        make_pdf(src / f"herons{n}.pdf", [f"Heron report {n}. {page}", page, page])
    db = tmp_path / "db"
    with ScriptedServer(latency_ms=50) as server:
        # The fifth propositions request is held until the server stops, so Ctrl-C lands
        # mid-run however slowly this test's process is scheduled beside the run.
        server.script(*[Action()] * 4, delayed(600_000), step="propositions")
        env = dict(os.environ, **scripted_environment(server), PROPDEX_LLM_CONCURRENCY="1",
                   PROPDEX_DOCUMENT_CONCURRENCY="1", PROPDEX_CACHE_DIR=str(tmp_path / "cache"))
        command = [sys.executable, "-m", "propdex.cli", "ingest", str(src), "--db", str(db)]
        run = subprocess.Popen(command, env=env, cwd=REPO, start_new_session=True, text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and run.poll() is None and server.calls("propositions") < 5:
            time.sleep(0.1)
        assert run.poll() is None, f"the run ended before Ctrl-C: {run.stderr.read()!r}"
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        err = run.stderr.read()
        code = run.wait(timeout=120)
        left = _wait_until_gone(run.pid)

        finished = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                                  timeout=600)

    assert (130, "propdex: interrupted") == (code, err.strip().splitlines()[-1]), err
    assert "KeyboardInterrupt" not in err
    assert set() == left
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
