"""Test-wide environment: an isolated Prefect home, offline model loading, corpus access."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

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
for name in list(os.environ):
    # A developer's own LLM configuration must not leak into the tests.
    if name.startswith("PROPDEX_"):
        del os.environ[name]

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


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
