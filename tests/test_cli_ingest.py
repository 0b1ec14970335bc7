"""`propdex ingest` from the command line: an unchanged corpus is reported without a flow run,
any change runs the flow, and the progress display shows only on a terminal."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import lancedb
import pytest

from propdex.cli import main, progress
from propdex.pipeline.plan import needs_run, plan_sources
from propdex.settings import Settings

pytestmark = pytest.mark.prefect

REPO = Path(__file__).resolve().parents[1]
VOLATILE = ("run_id", "seconds")  # differ between any two runs


class Terminal(io.StringIO):
    """An output stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def write_notes(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, animal in (("herons.md", "Herons"), ("otters.txt", "Otters")):
        (folder / name).write_text(
            f"# {animal}\n\n{animal} live near rivers and lakes. {animal} eat fish they catch "
            f"in shallow water. Young {animal.lower()} stay with their parents for a year.\n",
            encoding="utf-8")
    return folder


def run_cli(*args: str, stdout: io.StringIO | None = None,
            stderr: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = stdout or io.StringIO(), stderr or io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def flow_runs() -> int:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.count_flow_runs()


def without_volatile(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in VOLATILE}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> dict:
    """Two notes indexed through the CLI; tests re-run on them without changing them."""
    root = tmp_path_factory.mktemp("cli-ingest")
    folder = write_notes(root / "notes")
    db = str(root / "db")
    assert 0 == run_cli("ingest", str(folder), "--db", db)[0]
    return {"folder": folder, "db": db}


@pytest.fixture(scope="module")
def unchanged(indexed) -> dict:
    """An unchanged re-run with --json, counting flow runs around it."""
    before = flow_runs()
    code, out, err = run_cli("ingest", str(indexed["folder"]), "--db", indexed["db"], "--json")
    return {"code": code, "summary": json.loads(out), "err": err,
            "new_flow_runs": flow_runs() - before}


def test_an_unchanged_rerun_starts_no_flow_run(unchanged):
    assert 0 == unchanged["new_flow_runs"]


def test_an_unchanged_rerun_exits_0_and_lists_the_unchanged_files(unchanged, indexed):
    expected = (0, sorted(str(p) for p in indexed["folder"].iterdir()))
    assert expected == (unchanged["code"], unchanged["summary"]["unchanged"])


def test_an_unchanged_rerun_prints_what_the_flow_returns(unchanged, indexed):
    from flows.ingest import ingest

    flow_summary = ingest(sources=[str(indexed["folder"])], db=indexed["db"])

    assert without_volatile(flow_summary) == without_volatile(unchanged["summary"])


def test_an_unchanged_rerun_reports_that_nothing_changed(indexed):
    code, out, _ = run_cli("ingest", str(indexed["folder"]), "--db", indexed["db"])

    assert (0, True) == (code, "Nothing changed" in out)


def test_a_missing_path_in_an_unchanged_rerun_exits_1_without_a_flow_run(indexed):
    missing = indexed["folder"].parent / "no-such-notes.md"
    before = flow_runs()

    code, _, err = run_cli("ingest", str(indexed["folder"]), str(missing), "--db", indexed["db"])

    expected = (1, f"propdex: {missing}: no such file, folder or matching glob\n", 0)
    assert expected == (code, err, flow_runs() - before)


def test_rows_a_crashed_run_left_need_a_run_to_sweep_them(indexed, tmp_path):
    db = tmp_path / "db"
    shutil.copytree(indexed["db"], db)
    chunks = lancedb.connect(str(db)).open_table("chunks")
    orphan = chunks.to_arrow().slice(0, 1).to_pylist()[0] | {"run_id": "crashed-run"}
    chunks.add([orphan])
    settings = Settings(db=str(db))

    plan = plan_sources([str(indexed["folder"])], settings, force=False, prune=True)

    assert (True, True) == (plan.changes_nothing, needs_run(plan, settings))


def _change(folder: Path) -> None:
    (folder / "herons.md").write_text("# Herons\n\nHerons nest in colonies called heronries.\n",
                                      encoding="utf-8")


def _remove(folder: Path) -> None:
    (folder / "otters.txt").unlink()


@pytest.fixture(scope="module", params=["changed", "removed"])
def rerun(request, tmp_path_factory) -> dict:
    """A re-run after one file changed or was removed; its output goes to a pipe."""
    root = tmp_path_factory.mktemp(f"cli-rerun-{request.param}")
    folder = write_notes(root / "notes")
    db = str(root / "db")
    assert 0 == run_cli("ingest", str(folder), "--db", db)[0]
    {"changed": _change, "removed": _remove}[request.param](folder)
    before = flow_runs()
    code, out, err = run_cli("ingest", str(folder), "--db", db, "--json")
    return {"kind": request.param, "code": code, "summary": json.loads(out), "err": err,
            "new_flow_runs": flow_runs() - before, "folder": folder}


def test_a_changed_or_removed_file_starts_a_flow_run(rerun):
    assert 1 == rerun["new_flow_runs"]


def test_the_flow_run_reports_the_change(rerun):
    summary = rerun["summary"]
    actual = {"changed": [d["reason"] for d in summary["documents"]],
              "removed": [Path(s).name for s in summary["removed"]]}[rerun["kind"]]
    assert {"changed": ["changed"], "removed": ["otters.txt"]}[rerun["kind"]] == actual


def test_a_run_whose_output_is_not_a_terminal_shows_no_progress(rerun):
    assert (0, "") == (rerun["code"], rerun["err"])


@pytest.mark.parametrize(("json_output", "stdout_tty", "stderr_tty", "expected"), [
    (False, True, True, True),
    (True, True, True, False),
    (False, False, True, False),
    (False, True, False, False),
])
def test_progress_is_shown_only_to_a_terminal_without_json(json_output, stdout_tty, stderr_tty,
                                                            expected):
    stdout = Terminal() if stdout_tty else io.StringIO()
    stderr = Terminal() if stderr_tty else io.StringIO()
    assert expected == progress.wanted(json_output, stdout, stderr)


def test_a_run_on_a_terminal_shows_documents_done_stage_and_rate(tmp_path, monkeypatch):
    folder = write_notes(tmp_path / "notes")
    terminal_out, terminal_err = Terminal(), Terminal()
    monkeypatch.setattr("sys.stdout", terminal_out)
    monkeypatch.setattr("sys.stderr", terminal_err)

    code = main(["ingest", str(folder), "--db", str(tmp_path / "db")])

    shown = terminal_err.getvalue()
    expected = (0, True, True, True)
    assert expected == (code, "2/2" in shown, "embed " in shown, "doc/s" in shown or "s/doc" in shown)


def test_a_prefect_home_that_cannot_be_created_is_a_clear_error(tmp_path):
    """In a fresh process, where the CLI starts Prefect's API itself."""
    import os
    import subprocess
    import sys

    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    folder = write_notes(tmp_path / "notes")
    env = dict(os.environ, PREFECT_HOME=str(blocker / "prefect"), PYTHONPATH=str(REPO))

    done = subprocess.run([sys.executable, "-m", "propdex.cli", "ingest", str(folder), "--db",
                           str(tmp_path / "db")], env=env, capture_output=True, text=True)

    message = f"propdex: cannot create Prefect's home {blocker / 'prefect'} (PREFECT_HOME): Not a directory"
    assert (1, True) == (done.returncode, message in done.stderr)


def test_search_output_cut_short_by_its_reader_is_not_an_error(tmp_path):
    import subprocess
    import sys

    script = ("import sys; from propdex.cli import main; "
              "sys.exit(main(['search', 'anything', '--db', sys.argv[1], '--mode', 'fts']))")
    (tmp_path / "db").mkdir()  # an empty index
    reader = subprocess.Popen(["head", "-c", "0"], stdin=subprocess.PIPE)
    reader.wait()  # gone before propdex writes: every write hits a closed pipe
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "db")],
                          stdout=reader.stdin, stderr=subprocess.PIPE, text=True)

    assert (0, "") == (done.returncode, done.stderr)


@pytest.mark.parametrize("command", [["search", "owls"], ["status"], ["verify"]])
def test_a_read_command_on_a_database_that_does_not_exist_says_so(tmp_path, capsys, command):
    # A mistyped --db: not "no results" or "the index is empty", which read as a bad ingest.
    code = main([*command, "--db", str(tmp_path / "typo")])

    assert (2, f"propdex: no index at {tmp_path / 'typo'}: check --db (or PROPDEX_DB), or run "
               "`propdex ingest` first\n") == (code, capsys.readouterr().err)


def test_a_first_ingest_of_a_mistyped_folder_says_so_without_starting_prefect(tmp_path):
    """In a fresh process: the report comes from planning, and Prefect is never imported."""
    import subprocess
    import sys

    script = ("import sys; from propdex.cli import main; code = main(sys.argv[1:]); "
              "print(code, 'prefect' in sys.modules, file=sys.stderr)")
    done = subprocess.run(
        [sys.executable, "-c", script, "ingest", str(tmp_path / "exmaples"), "--db",
         str(tmp_path / "db")],
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        capture_output=True, text=True, timeout=120)

    expected = [f"propdex: {tmp_path / 'exmaples'}: no such file, folder or matching glob",
                "1 False"]
    assert (expected, False) == (done.stderr.strip().splitlines(), (tmp_path / "db").exists())
