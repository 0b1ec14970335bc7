"""Test-wide environment: an isolated Prefect home, offline model loading, corpus access."""

from __future__ import annotations

import os
import signal
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from tests.module_durations import (
    RECORD_OPTION,
    ModuleDurationsRecorder,
    modules_longest_first,
    read_module_durations,
)

# Set before anything imports prefect: a private PREFECT_HOME keeps the ephemeral API's
# database and persisted task results out of the user's ~/.prefect.
# Under pytest-xdist each worker inherits the home its controller made here: it makes its own,
# so two processes' ephemeral APIs never share one SQLite database. A home set by the caller
# is kept.
_OWN_HOME = "PYTEST_PROPDEX_PREFECT_HOME"
if os.environ.get("PREFECT_HOME", os.environ.get(_OWN_HOME)) == os.environ.get(_OWN_HOME):
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="propdex-tests-prefect-")
os.environ[_OWN_HOME] = os.environ["PREFECT_HOME"]
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# A suite started as a background job of a non-interactive shell (`pytest ... &` in a script,
# nohup) begins with SIGINT ignored, and every `propdex` process a test interrupts would
# inherit that: propdex leaves an ignored SIGINT ignored, by design, so the Ctrl-C tests would
# see runs that never get it. The tests' processes start with Python's own handling instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
for name in list(os.environ):
    # A developer's own LLM configuration must not leak into the tests.
    if name.startswith("PROPDEX_"):
        del os.environ[name]

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


# Under `pytest -n 2 --dist loadfile` (README's and CI's command) each module runs whole on one
# worker, and xdist hands the modules out in order, by default the modules with the most tests
# first. The longest modules have few tests (real CLI runs, Prefect servers, Dask, PostgreSQL,
# llama.cpp): they came last, and one worker ran the last of them alone while the other had
# finished. They go first instead, longest first, by the seconds a whole-suite run measured
# (tests/module_durations.json, rewritten by `--record-module-durations`); a module not
# measured yet goes by its marks: one that starts real processes (a test marked `realllm` or
# `prefect`) among the measured ones as long as their median, the others last. The two
# workers then end within a short module of each other.
STARTS_PROCESSES = ("realllm", "prefect")  # markers of tests that start real processes


def pytest_addoption(parser):
    parser.addoption(RECORD_OPTION, action="store_true",
                     help="write each test module's seconds to tests/module_durations.json, "
                          "which orders the modules for xdist's workers (run the whole suite)")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order set below
        config.option.loadscopereorder = False
    if config.getoption(RECORD_OPTION) and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(ModuleDurationsRecorder(config.rootpath), "propdex-module-durations")


def pytest_collection_modifyitems(config, items):
    """Modules longest first, for xdist's workers (a serial run keeps the files' order)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    tests_in = Counter(item.nodeid.split("::")[0] for item in items)
    with_processes = {item.nodeid.split("::")[0] for item in items
                      if any(item.get_closest_marker(name) for name in STARTS_PROCESSES)}
    order = modules_longest_first(tests_in, with_processes, read_module_durations())
    rank = {module: n for n, module in enumerate(order)}
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: a module's tests keep their order


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"reference corpus not found at {CORPUS} (only present beside the dev checkout)")
    return CORPUS


# Fixtures shared by many modules.
from tests.scripted_fixtures import llm_env, make_openai_backend, scripted_server  # noqa: E402,F401
from tests.service_harness import scripted  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _fresh_negotiations():
    """Each test's scripted server negotiates from scratch: servers of earlier tests may have
    had the same port, and what they accepted (and their context windows, and whether they
    were reachable) is remembered per URL for the process."""
    from propdex.llm.context_window import forget_context_windows
    from propdex.llm.structured import forget_negotiations
    from propdex.llm.unreachable import forget_unreachable_servers

    forget_negotiations()
    forget_context_windows()
    forget_unreachable_servers()  # a port an earlier test's server left closed is in use again
    yield
