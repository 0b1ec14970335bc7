"""The environment of the ephemeral Prefect API a CLI ingest starts: no work a one-run local
API does not need, and nothing left in Prefect's home that misleads a later server."""

from __future__ import annotations

import tomllib

# Imported before any test sets PREFECT_HOME: Prefect fixes its settings at first import.
import prefect.context  # noqa: F401

from propdex.prefect_runtime.api import EphemeralApi, server_environment


def test_the_server_sends_no_telemetry(monkeypatch):
    monkeypatch.delenv("PREFECT_SERVER_ANALYTICS_ENABLED", raising=False)
    assert "false" == server_environment()["PREFECT_SERVER_ANALYTICS_ENABLED"]


def test_the_home_is_not_marked_as_having_its_blocks_registered(tmp_path, monkeypatch):
    # The server skips block registration; had it memoized that, a full server started on
    # this home later would skip registering them too, and its UI would list no block types.
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    api = EphemeralApi()
    try:
        assert api.url() is not None
    finally:
        api.stop()
    memo = tmp_path / "memo_store.toml"
    recorded = tomllib.loads(memo.read_text()) if memo.exists() else {}
    assert None is recorded.get("block_auto_registration")
