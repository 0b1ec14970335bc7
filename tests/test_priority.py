"""`propdex ingest --nice N`: the ingest goes on at a lower CPU priority in a session of its own.

Each test runs in a subprocess: the code under test forks and renices its own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from propdex.cli.priority import run_at_lower_priority
from tests.prefect_server import wait_for

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

# The process that goes on reports its niceness and session, then ends with status 3 (or
# sleeps, for the signal test); the parent ends with the status the function returns.
SCRIPT = """
import json, os, sys, time
from propdex.cli.priority import run_at_lower_priority
status = run_at_lower_priority({nice})
if status is not None:
    sys.exit(status)
print(json.dumps({{"nice": os.getpriority(os.PRIO_PROCESS, 0), "pid": os.getpid(),
                  "leads_its_session": os.getsid(0) == os.getpid()}}), flush=True)
time.sleep({sleep})
sys.exit(3)
"""


def test_the_ingest_goes_on_at_the_niceness_in_its_own_session():
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(nice=7, sleep=0)], env=ENV,
                          capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout)
    assert (3, 7, True) == (done.returncode, report["nice"], report["leads_its_session"])


def test_it_says_at_what_priority_it_runs():
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(nice=5, sleep=0)], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert "propdex: ingesting at a lower CPU priority (nice 5, its own session" in done.stderr


def test_a_signal_to_the_waiting_parent_reaches_the_ingest():
    parent = subprocess.Popen([sys.executable, "-c", SCRIPT.format(nice=3, sleep=60)],
                              env=ENV, stdout=subprocess.PIPE, text=True)
    child = json.loads(parent.stdout.readline())["pid"]
    parent.send_signal(signal.SIGTERM)
    status = parent.wait(timeout=30)

    def child_gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        return False

    assert (128 + signal.SIGTERM, True) == (
        status, wait_for(child_gone, timeout=10, interval=0.1, what="the ingest to end"))


@pytest.mark.parametrize("nice", [-1, 20])
def test_a_niceness_outside_0_to_19_is_refused(nice):
    with pytest.raises(ValueError, match="between 0 and 19"):
        run_at_lower_priority(nice)


@pytest.mark.prefect
def test_propdex_ingest_nice_indexes_at_that_priority(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "herons.md").write_text("# Herons\n\nHerons eat fish they catch in shallow "
                                     "water. Herons nest in colonies.\n", encoding="utf-8")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "propdex.cli", "ingest", str(notes), "--db",
         str(tmp_path / "db"), "--llm", "offline", "--nice", "4", "--json"],
        env=ENV, capture_output=True, text=True, timeout=600)
    summary = json.loads(done.stdout)
    assert (0, ["indexed"], True) == (
        done.returncode, [d["status"] for d in summary["documents"]],
        "lower CPU priority (nice 4, its own session" in done.stderr), (
        done.stderr[-2000:], time.monotonic() - started)
