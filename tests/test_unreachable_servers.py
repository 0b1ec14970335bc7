"""A server nothing listens at: one request pays its retries, the requests after it fail at
once naming the server, until the cooldown lets one trial request through. Real openai
client against a closed port on 127.0.0.1 and the scripted server (which can come back on
that port); a 5xx or a read timeout marks nothing."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from propdex.embed.openai_embed import OpenAIEmbedder
from propdex.errors import LLMError, LLMServerUnreachableError
from propdex.llm.openai_backend import OpenAIBackend
from propdex.settings import Settings
from tests.cli_capture import run_cli
from tests.scripted_fixtures import scripted_environment, scripted_settings
from tests.scripted_server import ScriptedServer, hang, server_error

TEXTS = ["Basalt cools fast.", "Granite cools slowly."]
COOLDOWN = 0.5


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens at (bound once, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Attempts(logging.Handler):
    """Counts the retry warnings of propdex.llm: one per failed attempt that is retried."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "failed" in record.getMessage() and "retrying" in record.getMessage():
            self.count += 1


@pytest.fixture
def retries() -> Iterator[Attempts]:
    handler = Attempts()
    logger = logging.getLogger("propdex.llm")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def settings_at(port: int, **overrides) -> Settings:
    values = {"embedder": "openai", "embed_model": "scripted-embed",
              "embed_base_url": f"http://127.0.0.1:{port}/v1", "llm_timeout": 5.0,
              "llm_max_attempts": 3, "llm_backoff_max": 0.05,
              "llm_unreachable_cooldown_s": COOLDOWN}
    return Settings(**{**values, **overrides})


def failure(call) -> BaseException | None:
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the test compares what was raised
        return error
    return None


def test_the_request_that_spends_its_retries_on_a_closed_port_names_the_server(retries):
    port = closed_port()
    error = failure(lambda: OpenAIEmbedder(settings_at(port)).embed(TEXTS))
    assert (LLMServerUnreachableError, True, True) == (
        type(error), f"server http://127.0.0.1:{port}/v1 is unreachable" in str(error),
        "Connection refused" in str(error))


def test_the_requests_after_it_fail_at_once_without_retries(retries):
    embedder = OpenAIEmbedder(settings_at(closed_port(), llm_unreachable_cooldown_s=60))
    first = failure(lambda: embedder.embed(TEXTS))
    paid = retries.count
    started = time.perf_counter()
    later = [failure(lambda: embedder.embed(TEXTS)) for _ in range(5)]
    assert (2, [str(first)] * 5, True) == (paid, [str(e) for e in later],
                                           time.perf_counter() - started < 0.5)
    assert 2 == retries.count


def test_requests_in_flight_at_once_pay_one_requests_retries(retries):
    embedder = OpenAIEmbedder(settings_at(closed_port()))
    with ThreadPoolExecutor(8) as pool:
        errors = list(pool.map(lambda _: failure(lambda: embedder.embed(TEXTS)), range(8)))
    assert ([LLMServerUnreachableError] * 8, 2) == ([type(e) for e in errors], retries.count)


def test_after_the_cooldown_one_trial_attempt_renews_the_mark(retries):
    embedder = OpenAIEmbedder(settings_at(closed_port()))
    failure(lambda: embedder.embed(TEXTS))
    time.sleep(COOLDOWN + 0.1)
    trial = failure(lambda: embedder.embed(TEXTS))
    assert (LLMServerUnreachableError, 2, True) == (type(trial), retries.count,
                                                    "in 1 attempt(s)" in str(trial))


def test_a_server_that_comes_back_is_used_after_the_cooldown():
    port = closed_port()
    embedder = OpenAIEmbedder(settings_at(port))
    failure(lambda: embedder.embed(TEXTS))
    with ScriptedServer(port=port) as server:
        within = failure(lambda: embedder.embed(TEXTS))
        time.sleep(COOLDOWN + 0.1)
        after = embedder.embed(TEXTS)
        embedder.close()
        assert (LLMServerUnreachableError, (2, 384), 1) == (
            type(within), after.shape, server.calls(path="/v1/embeddings"))


def test_a_chat_request_fails_at_once_once_the_embeddings_request_found_the_server_gone():
    port = closed_port()
    settings = settings_at(port, llm="openai", llm_base_url=f"http://127.0.0.1:{port}/v1",
                           llm_model="scripted-model", llm_unreachable_cooldown_s=60)
    embedding_error = failure(lambda: OpenAIEmbedder(settings).embed(TEXTS))
    backend = OpenAIBackend(settings)
    started = time.perf_counter()
    title_error = failure(lambda: backend.title("Basalt is a volcanic rock.", truncated=False,
                                                hint=None))
    assert (str(embedding_error), True) == (str(title_error), time.perf_counter() - started < 0.5)


@pytest.mark.parametrize("fault", [server_error(500), hang(2)], ids=["5xx", "read timeout"])
def test_a_server_that_answers_badly_or_slowly_is_not_marked(fault, scripted_server, retries):
    embedder = OpenAIEmbedder(scripted_settings(scripted_server, llm_timeout=0.5))
    scripted_server.script(*[fault] * 3)
    error = failure(lambda: embedder.embed(TEXTS))
    after = embedder.embed(TEXTS)
    embedder.close()
    assert (LLMError, 2, (2, 384)) == (type(error), retries.count, after.shape)


def test_a_request_that_failed_after_the_mark_takes_the_marks_error_not_a_new_probe():
    # Sent before another request's retries marked the server, refused after: it must not
    # start paying retries of its own as a new probe.
    from propdex.llm import unreachable

    url = f"http://127.0.0.1:{closed_port()}/v1"
    unreachable.mark_unreachable(url, f"server {url} is unreachable", cooldown=60)
    try:
        unreachable.await_probe(url, object(), lambda: False)
        outcome = "became the probe"
    except LLMServerUnreachableError as error:
        outcome = str(error)
    assert f"server {url} is unreachable" == outcome


# --------------------------------------------------------------------------- whole runs

DOCUMENTS = 6
MAX_ATTEMPTS = 3



def write_documents(folder: Path, version: str) -> None:
    for n in range(DOCUMENTS):
        (folder / f"rock{n}.md").write_text(
            f"# Rock {n}\n\nBasalt sample {n} ({version}) cooled over {n + 2} years "
            "and cracked into columns.\n", encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Iterator[dict]:
    """Index six documents, stop the server, change them and ingest against the closed port
    (their requests in flight at once), then start the server again on that port and ingest
    once more."""
    root = tmp_path_factory.mktemp("unreachable")
    folder, db = root / "docs", str(root / "db")
    folder.mkdir()
    write_documents(folder, "first")
    handler = Attempts()
    logging.getLogger("propdex.llm").addHandler(handler)
    with pytest.MonkeyPatch.context() as env:
        with ScriptedServer() as server:
            port = int(server.url.rsplit(":", 1)[1])
            for name, value in {**scripted_environment(server),
                                "PROPDEX_LLM_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}.items():
                env.setenv(name, value)
            first = run_cli("ingest", str(folder), "--db", db)
        write_documents(folder, "second")
        handler.count = 0
        started = time.perf_counter()
        stopped = run_cli("ingest", str(folder), "--db", db, "--json")
        seconds = time.perf_counter() - started
        paid = handler.count
        search = run_cli("search", "Basalt sample", "--db", db, "--level", "chunks",
                         "--mode", "fts", "--json", "-k", "20")
        with ScriptedServer(port=port):
            again = run_cli("ingest", str(folder), "--db", db, "--json")
    logging.getLogger("propdex.llm").removeHandler(handler)
    yield {"port": port, "first": first, "stopped": stopped, "seconds": seconds, "paid": paid,
           "summary": json.loads(stopped[1]), "search": json.loads(search[1]),
           "again": again, "again_summary": json.loads(again[1])}


@pytest.mark.prefect
def test_the_first_run_indexed_every_document(runs):
    assert 0 == runs["first"][0]


@pytest.mark.prefect
def test_a_run_against_a_closed_port_pays_one_requests_retries(runs):
    assert MAX_ATTEMPTS - 1 == runs["paid"]


@pytest.mark.prefect
def test_a_run_against_a_closed_port_exits_3(runs):
    assert 3 == runs["stopped"][0]


@pytest.mark.prefect
def test_the_run_stops_once_naming_the_server(runs):
    stop_lines = [line for line in runs["stopped"][2].splitlines() if "run stopped" in line]
    expected = f"propdex: run stopped: server http://127.0.0.1:{runs['port']}/v1 is unreachable"
    assert (1, True) == (len(stop_lines), stop_lines[0].startswith(expected))


@pytest.mark.prefect
def test_every_document_failed_as_unreachable(runs):
    outcomes = [(d["status"], d["error_kind"]) for d in runs["summary"]["documents"]]
    assert [("failed", "unreachable")] * DOCUMENTS == outcomes


@pytest.mark.prefect
def test_the_indexed_versions_stay_searchable(runs):
    hits = runs["search"]
    assert (DOCUMENTS, True) == (len({h["source"] for h in hits}),
                                 all("(first)" in h["text"] for h in hits))


@pytest.mark.prefect
def test_the_next_run_uses_the_server_that_came_back(runs):
    statuses = [d["status"] for d in runs["again_summary"]["documents"]]
    assert (0, ["indexed"] * DOCUMENTS) == (runs["again"][0], statuses)
