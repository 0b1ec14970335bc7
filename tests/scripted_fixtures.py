"""Pytest fixtures for the scripted OpenAI-compatible server (import them in conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from propdex.settings import Settings
from tests.scripted_server import DEFAULT_MODEL, ScriptedServer

# A key that must never show up in an exception message, a repr or a log line.
SENTINEL_KEY = "sk-SENTINEL-do-not-leak-4f1c2a9e7b"
# A task retried after a transient fault waits its declared delays (2 s, 10 s) times this.
RETRY_DELAY_SCALE = 0.01


def scripted_settings(server: ScriptedServer, **overrides: Any) -> Settings:
    """Settings pointing every LLM and embedding call at ``server``, with quick retries."""
    values: dict[str, Any] = {
        "llm": "openai",
        "llm_base_url": server.url + "/v1",
        "llm_api_key": SENTINEL_KEY,
        "llm_model": DEFAULT_MODEL,
        "llm_timeout": 5.0,
        "llm_max_attempts": 3,
        "llm_backoff_max": 0.05,
        "retry_delay_scale": RETRY_DELAY_SCALE,
        "embedder": "openai",
        "embed_model": "scripted-embed",
    }
    values.update(overrides)
    return Settings(**values)


def scripted_environment(server: ScriptedServer) -> dict[str, str]:
    """PROPDEX_* variables pointing a whole ingest run (LLM and embeddings) at ``server``, with
    quick retries and small chunks, for tests that run the flow or the CLI."""
    return {
        "PROPDEX_LLM": "openai", "PROPDEX_LLM_BASE_URL": server.url + "/v1",
        "PROPDEX_LLM_API_KEY": SENTINEL_KEY, "PROPDEX_LLM_MODEL": "scripted-model",
        "PROPDEX_LLM_TIMEOUT": "5", "PROPDEX_LLM_MAX_ATTEMPTS": "2",
        "PROPDEX_LLM_BACKOFF_MAX": "0.05", "PROPDEX_RETRY_DELAY_SCALE": str(RETRY_DELAY_SCALE),
        "PROPDEX_EMBEDDER": "openai",
        "PROPDEX_EMBED_MODEL": "scripted-embed", "PROPDEX_CHUNK_SIZE": "300",
    }


@contextmanager
def scripted_run_environment(**extra: str) -> Iterator[ScriptedServer]:
    """A scripted server and llm_env's PROPDEX_ variables (plus ``extra``) for the ingest of a
    module-scoped fixture, which several tests then read. The variables are gone when the
    block ends, so the module's later tests do not run under them."""
    from propdex.llm.structured import forget_negotiations

    forget_negotiations()  # the new server may have the port of an earlier test's
    with ScriptedServer() as server, pytest.MonkeyPatch.context() as patch:
        for name, value in {**scripted_environment(server), **extra}.items():
            patch.setenv(name, value)
        yield server


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def llm_env(scripted_server, monkeypatch):
    """The LLM and the embedder on the scripted server, through PROPDEX_ variables."""
    for name, value in scripted_environment(scripted_server).items():
        monkeypatch.setenv(name, value)
    return scripted_server


@pytest.fixture
def make_openai_backend(scripted_server):
    """A factory of OpenAI backends on the scripted server (settings overridable), closed
    after the test."""
    from propdex.llm.openai_backend import OpenAIBackend

    made: list[OpenAIBackend] = []

    def make(**overrides: Any) -> OpenAIBackend:
        made.append(OpenAIBackend(scripted_settings(scripted_server, **overrides)))
        return made[-1]

    yield make
    for backend in made:
        backend.close()
