"""The ephemeral Prefect API process: launched before the CLI imports Prefect, it steps aside
for a configured server and otherwise serves Prefect's API."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

# Prefect fixes its global settings from the environment when prefect.context is first
# imported. Imported first under a test's PREFECT_API_URL or PREFECT_HOME below, every later
# test in the process would talk to that unreachable server or deleted home.
import prefect.context  # noqa: F401
import pytest

from propdex.prefect_runtime.api import EphemeralApi, using_api
from propdex.prefect_runtime.server import NOT_NEEDED

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("setting", [
    {"PREFECT_API_URL": "http://127.0.0.1:9/api"},
    {"PREFECT_SERVER_EPHEMERAL_ENABLED": "false"},
])
def test_the_server_process_steps_aside_when_not_needed(tmp_path, setting):
    env = {**os.environ, "PREFECT_HOME": str(tmp_path), "PYTHONPATH": str(REPO), **setting}
    done = subprocess.run([sys.executable, "-m", "propdex.prefect_runtime.server", "0"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert NOT_NEEDED == done.returncode


def test_a_configured_server_is_used_instead(tmp_path, monkeypatch):
    # Set where only Prefect's settings see it (as a profile would), not by the CLI's check.
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    api = EphemeralApi()
    try:
        assert None is api.url()
    finally:
        api.stop()


def test_the_server_answers_from_a_new_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    api = EphemeralApi()
    try:
        with urllib.request.urlopen(f"{api.url()}/health", timeout=10) as response:
            assert 200 == response.status
    finally:
        api.stop()
    assert (tmp_path / "home" / "prefect.db").is_file()


def test_flow_runs_on_the_processs_own_api_send_no_heartbeats(tmp_path, monkeypatch):
    # Nothing outlives the process to watch them, and the end of each flow run would wait up
    # to a second for Prefect's heartbeat thread.
    from prefect.settings import get_current_settings

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    api = EphemeralApi()
    try:
        with using_api(api):
            assert None is get_current_settings().flows.heartbeat_frequency
    finally:
        api.stop()


def test_the_server_is_launched_without_importing_prefect(tmp_path):
    # So the CLI launches it first thing, and imports Prefect while the server starts.
    script = textwrap.dedent("""
        import sys, time, urllib.request
        sys.modules["prefect"] = None  # any import of Prefect here would fail
        from propdex.prefect_runtime.api import _free_port, launch_server_process
        port = _free_port()
        server = launch_server_process(port)
        try:
            for _ in range(600):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health") as r:
                        print(r.status)
                        break
                except OSError:
                    time.sleep(0.1)
        finally:
            server.terminate()
            server.wait()
    """)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, check=True, timeout=120,
                          env={**env, "PYTHONPATH": str(REPO), "PREFECT_HOME": str(tmp_path)})
    assert "200" == done.stdout.strip()
