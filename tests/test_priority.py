"""`propdex ingest --nice N`: the ingest goes on at a lower CPU priority in a session of its own;
a service's background threads run below the thread answering its requests.

Each test runs in a subprocess: the code under test forks and renices its own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from propdex.priority import run_at_lower_priority
from tests.prefect_server import wait_for

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

# The process that goes on reports its niceness and session, then ends with status 3 (or
# sleeps, for the signal test); the parent ends with the status the function returns.
SCRIPT = """
import json, os, sys, time
from propdex.priority import run_at_lower_priority
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
        env={**ENV, "PREFECT_HOME": str(tmp_path / "prefect")}, capture_output=True,
        text=True, timeout=600)
    summary = json.loads(done.stdout)
    assert (0, ["indexed"], True) == (
        done.returncode, [d["status"] for d in summary["documents"]],
        "lower CPU priority (nice 4, its own session" in done.stderr), (
        done.stderr[-2000:], time.monotonic() - started)


# A service's background threads: the resident index's refresher and merges, and LanceDB's
# threads, run below the thread answering requests. In a subprocess: the niceness of
# LanceDB's threads would otherwise stay lowered for the rest of the test session.
BACKGROUND = """
import json, os, sys, threading, time
from pathlib import Path
from propdex.resident import ResidentIndex
from propdex.store import Index
from tests.store_rows import DIM, make_version
index = Index.open(sys.argv[1], dim=DIM)
index.replace_document(*make_version("doc1", "r1", ["owls hunt at night"]).rows)
resident = ResidentIndex(index, refresh_seconds=0.05)
resident.view()  # the first load, in this thread; then the refresher starts
deadline = time.monotonic() + 30
while resident._refresher is None and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.5)
def nice(thread):
    return os.getpriority(os.PRIO_PROCESS, thread)
workers = [int(t.name) for t in Path("/proc/self/task").iterdir()
           if (t / "comm").read_text().startswith("lancedb-tokio")]
loop = [t.native_id for t in threading.enumerate() if t.name == "LanceDBBackgroundEventLoop"]
print(json.dumps({"serving": nice(threading.get_native_id()),
                  "refresher": nice(resident._refresher.native_id),
                  "lancedb": sorted({nice(t) for t in workers + loop}),
                  "lancedb_threads": len(workers + loop)}))
resident.close()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="niceness per thread: Linux")
def test_a_resident_index_refreshes_below_the_thread_that_searches(tmp_path):
    done = subprocess.run([sys.executable, "-c", BACKGROUND, str(tmp_path / "db")],
                          env=ENV, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert 0 == done.returncode, done.stderr
    niceness = json.loads(done.stdout.splitlines()[-1])
    assert ({"serving": 0, "refresher": 10, "lancedb": [10]}, True) == (
        {k: niceness[k] for k in ("serving", "refresher", "lancedb")},
        niceness["lancedb_threads"] >= 2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="niceness per thread: Linux")
@pytest.mark.parametrize(("before", "asked", "after"), [(0, 10, 10), (15, 10, 15)])
def test_a_thread_is_lowered_alone_and_never_raised(before, asked, after):
    from propdex.priority import lower_thread_priority

    seen = {}

    def worker() -> None:
        os.setpriority(os.PRIO_PROCESS, 0, before)  # this thread only
        seen["done"] = lower_thread_priority(asked)
        seen["nice"] = os.getpriority(os.PRIO_PROCESS, 0)

    caller = os.getpriority(os.PRIO_PROCESS, 0)
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert ({"done": True, "nice": after}, caller) == (seen, os.getpriority(os.PRIO_PROCESS, 0))
