"""`propdex serve`: a real uvicorn process on a free port, queried over the socket.

Queries are embedded by the scripted OpenAI-compatible server in both the service and the
CLI, and the index's vectors are the same scripted embeddings, so results are deterministic.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from propdex.cli import main
from propdex.service.run import is_loopback, settings_environment
from propdex.settings import Settings
from propdex.store import Index
from tests.prefect_server import start_process, stop_process, wait_for
from tests.scripted_server import EMBEDDINGS_PATH
from tests.service_harness import (
    REPO,
    embedding_environment,
    free_port,
    running_service,
    scripted_vector,
    version,
)
from tests.store_rows import DIM

ALPHA_SOURCE = "/corpus/reports/alpha report.pdf"
BETA_SOURCE = "/corpus/notes/beta.txt"
TOKEN = "test-token-5b7d0c"


def alpha(run_id: str = "r1"):
    return version("alpha", run_id, [["Owls hunt small mammals at night.", "Owls nest in old trees."],
                                     ["Foxes dig dens in sandy soil.", "Foxes eat berries."]],
                   ALPHA_SOURCE, "Alpha Report")


def beta(run_id: str = "r1"):
    return version("beta", run_id, [["Bees make honey from nectar.", "Honey keeps for years."],
                                    ["Zebras graze on the savanna grass.", "Zebras live in herds."]],
                   BETA_SOURCE, "Beta Notes")


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve") / "db"
    index = Index.open(str(path), dim=DIM)
    index.replace_document(*alpha().rows)
    index.replace_document(*beta().rows)
    index.record_failure({"doc_id": "gamma", "source": "/corpus/gamma.pdf", "status": "failed",
                          "error": "encrypted: password required", "error_kind": "input"})
    return path


@pytest.fixture(scope="module")
def service(db, scripted):
    with running_service(db, embedding_environment(scripted)) as url:
        yield url


@pytest.fixture
def cli_env(monkeypatch, scripted):
    for name, value in embedding_environment(scripted).items():
        monkeypatch.setenv(name, value)


def cli_json(capsys, *args: str) -> list[dict]:
    capsys.readouterr()
    assert 0 == main(["search", *args, "--json"])
    return json.loads(capsys.readouterr().out)


# Search --------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [
    {},
    {"level": "chunks", "k": 3},
    {"level": "both", "mode": "hybrid", "k": 4},
    {"mode": "fts", "level": "chunks"},
    {"source": "*.txt"},
])
def test_service_results_equal_the_cli_json(service, db, cli_env, capsys, options):
    query = "Zebras graze on the savanna grass."
    flags = [f for key, value in options.items() if key != "source"
             for f in ("-k" if key == "k" else f"--{key}", str(value))]
    flags += ["--source", options["source"]] if "source" in options else []
    expected = cli_json(capsys, query, "--db", str(db), *flags)
    actual = httpx.post(service + "/search", json={"query": query, **options}).json()
    assert (expected, True) == (actual, len(actual) > 0)


def test_a_query_equal_to_a_proposition_finds_it_first(service):
    hits = httpx.post(service + "/search", json={"query": "Owls nest in old trees."}).json()
    first = hits[0]
    assert ("Owls nest in old trees.", "alpha:c0", "Alpha Report", ALPHA_SOURCE, 1, 1) == (
        first["text"], first["chunk_id"], first["title"], first["source"],
        first["page_start"], first["page_end"])


def test_a_repeated_query_is_embedded_once(service, scripted):
    query = {"query": "Which birds nest in old trees?"}
    before = scripted.calls(path=EMBEDDINGS_PATH)
    first = httpx.post(service + "/search", json=query).json()
    second = httpx.post(service + "/search", json=query).json()
    assert (first, 1) == (second, scripted.calls(path=EMBEDDINGS_PATH) - before)


@pytest.mark.parametrize(("source", "expected_docs"), [
    ("*' OR '1'='1*", set()),
    ("*'; DROP TABLE documents; --", set()),
    ("[", set()),
    ("\\", set()),
    ("*" * 500, {"alpha", "beta"}),
    ("/corpus/reports/*", {"alpha"}),
    ("*alpha report.pdf", {"alpha"}),
])
def test_hostile_source_globs_only_filter(service, source, expected_docs):
    response = httpx.post(service + "/search",
                          json={"query": "Owls hunt", "level": "both", "k": 10, "source": source})
    assert (200, expected_docs) == (response.status_code, {r["doc_id"] for r in response.json()})


def test_the_index_stays_whole_after_hostile_requests(service):
    assert {"documents": 3, "chunks": 4, "propositions": 8} == httpx.get(
        service + "/health").json()["rows"]


# Bad requests ---------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "field"), [
    ({"query": "owls", "k": 0}, "k"),
    ({"query": "owls", "k": 101}, "k"),
    ({"query": "owls", "k": "many"}, "k"),
    ({"query": "owls", "level": "sentences"}, "level"),
    ({"query": "owls", "mode": "semantic"}, "mode"),
    ({"query": ""}, "query"),
    ({"query": "x" * 2001}, "query"),
    ({"query": "owls\x00"}, "query"),
    ({"k": 3}, "query"),
    ({"query": "owls", "source": "*\x00*"}, "source"),
    ({"query": "owls", "doc_ids": ["alpha"] * 1001}, "doc_ids"),
    ({"query": "owls", "doc_ids": "alpha"}, "doc_ids"),
    ({"query": "owls", "limit": 3}, "limit"),
])
def test_a_bad_search_request_gets_422_naming_the_field(service, body, field):
    response = httpx.post(service + "/search", json=body)
    assert (422, True) == (response.status_code, response.json()["error"].startswith(field))


@pytest.mark.parametrize(("content", "headers"), [
    (json.dumps({"query": "owls", "k": 101}), {"Content-Type": "application/json"}),
    (json.dumps({"query": "owls\x00"}), {"Content-Type": "application/json; charset=utf-8"}),
    ('{"query": "owls",', {"Content-Type": "application/json"}),
    ("", {"Content-Type": "application/json"}),
    ("null", {}),
    ('["owls"]', {}),
    ("query=owls", {"Content-Type": "application/x-www-form-urlencoded"}),
])
def test_a_bad_search_request_gets_422_naming_the_problem(service, content, headers):
    answer = httpx.post(service + "/search", content=content, headers=headers)
    assert (422, True) == (answer.status_code, bool(answer.json()["error"]))


def test_a_body_over_the_limit_gets_413(service):
    response = httpx.post(service + "/search", content=b'{"query": "' + b"x" * 70_000 + b'"}',
                          headers={"Content-Type": "application/json"})
    assert (413, "request body over 65536 bytes") == (response.status_code,
                                                      response.json()["error"])


# Documents, chunks, health, docs ---------------------------------------------------------
def test_documents_lists_every_document_with_status_counts_and_last_run(service):
    rows = {r["doc_id"]: r for r in httpx.get(service + "/documents").json()}
    assert {
        "alpha": ("indexed", "Alpha Report", 2, 4, "r1"),
        "beta": ("indexed", "Beta Notes", 2, 4, "r1"),
        "gamma": ("failed", None, None, None, None),
    } == {doc_id: (r["status"], r["title"], r["chunk_count"], r["proposition_count"],
                   r["last_run_id"]) for doc_id, r in rows.items()}


def test_one_document_has_its_summary_and_no_text(service):
    row = httpx.get(service + "/documents/beta").json()
    assert ("A summary.", "Beta Notes", False) == (row["summary"], row["title"], "text" in row)


def test_a_chunk_comes_with_its_graded_propositions(service):
    chunk = httpx.get(service + "/chunks/alpha:c1").json()
    assert (
        "Foxes dig dens in sandy soil. Foxes eat berries.", "Alpha Report", 2, 2,
        [("alpha:c1:p0", "Foxes dig dens in sandy soil.", 9, True),
         ("alpha:c1:p1", "Foxes eat berries.", 9, True)],
    ) == (
        chunk["text"], chunk["title"], chunk["page_start"], chunk["page_end"],
        [(p["prop_id"], p["text"], p["accuracy"], p["passed"]) for p in chunk["propositions"]],
    )


@pytest.mark.parametrize("path", ["/documents/nowhere", "/chunks/alpha:c9"])
def test_unknown_ids_get_404(service, path):
    assert 404 == httpx.get(service + path).status_code


def test_health_names_the_embedder_and_counts_live_documents(service, db):
    health = httpx.get(service + "/health").json()
    assert (str(db), "scripted-embed", DIM, 2) == (
        health["db"], health["embedder"], health["dim"], health["live_documents"])


@pytest.fixture(scope="module")
def two_workers(db, scripted):
    with running_service(db, embedding_environment(scripted), "--workers", "2") as url:
        yield url


def test_two_workers_answer_on_one_port(two_workers):
    pids: set[int] = set()

    def both_answered() -> bool:
        pids.add(httpx.get(two_workers + "/health").json()["pid"])  # a new connection each
        return len(pids) == 2

    wait_for(both_answered, timeout=60, interval=0.01, what="both workers to answer")
    assert 2 == len(pids)


def _listening_sockets(port: int) -> int:
    """TCP sockets in LISTEN state on ``port`` (Linux's /proc/net/tcp)."""
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return sum(row[3] == "0A" and int(row[1].rsplit(":", 1)[1], 16) == port for row in rows)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
def test_each_worker_listens_on_a_socket_of_its_own(two_workers):
    # The kernel then spreads new connections over the workers (SO_REUSEPORT); on one
    # shared socket, 30 of 32 clients' connections went to one worker.
    assert 2 == _listening_sockets(int(two_workers.rsplit(":", 1)[1]))


def test_a_worker_that_dies_stops_the_service_with_its_status(db, scripted, tmp_path):
    port = free_port()
    process = start_process(
        "propdex serve", [sys.executable, "-m", "propdex.cli", "serve", "--db", str(db),
                          "--port", str(port), "--workers", "2"],
        {**os.environ, **embedding_environment(scripted), "PYTHONPATH": str(REPO)},
        tmp_path / "serve.log")
    try:
        pids: set[int] = set()

        def both_answered() -> bool:
            with contextlib.suppress(httpx.TransportError):
                pids.add(httpx.get(f"http://127.0.0.1:{port}/health").json()["pid"])
            return len(pids) == 2

        wait_for(both_answered, timeout=120, interval=0.05, what="both workers to answer",
                 alive=process.check_alive)
        victim, survivor = sorted(pids)
        os.kill(victim, signal.SIGKILL)
        status = process.popen.wait(timeout=60)
        # 128 + the signal that ended the worker, as a shell reports it.
        assert (128 + signal.SIGKILL, False) == (status, Path(f"/proc/{survivor}").exists())
    finally:
        stop_process(process)


def test_workers_serve_the_results_of_one_process(service, two_workers):
    body = {"query": "Zebras graze on the savanna grass.", "level": "both", "k": 4}
    assert httpx.post(service + "/search", json=body).json() == httpx.post(
        two_workers + "/search", json=body).json()


def test_worker_processes_get_the_command_line_settings():
    settings = Settings(db="/data/index", serve_workers=2, api_token="s3cret",
                        allowed_roots=["/a", "/b"])
    assert {"PROPDEX_DB": "/data/index", "PROPDEX_SERVE_WORKERS": "2",
            "PROPDEX_API_TOKEN": "s3cret",
            "PROPDEX_ALLOWED_ROOTS": '["/a", "/b"]'} == settings_environment(settings)


def test_openapi_docs_are_served(service):
    paths = httpx.get(service + "/openapi.json").json()["paths"]
    assert (200, {"/search", "/documents", "/documents/{doc_id}", "/chunks/{chunk_id}",
                  "/health"}) == (httpx.get(service + "/docs").status_code, set(paths))


def test_no_cors_headers_unless_configured(service):
    response = httpx.options(service + "/search", headers={
        "Origin": "https://example.com", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in response.headers


# The CLI as a client ---------------------------------------------------------------------
def test_the_cli_asks_the_service_named_by_server_url(service, cli_env, capsys, monkeypatch,
                                                      tmp_path):
    monkeypatch.setenv("PROPDEX_SERVER_URL", service)
    monkeypatch.setenv("PROPDEX_DB", str(tmp_path / "no-index-here"))
    hits = cli_json(capsys, "Bees make honey from nectar.", "-k", "1")
    assert ["Bees make honey from nectar."] == [h["text"] for h in hits]


def test_the_cli_searches_the_index_itself_when_no_service_answers(db, cli_env, capsys,
                                                                   monkeypatch):
    monkeypatch.setenv("PROPDEX_SERVER_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("PROPDEX_DB", str(db))
    hits = cli_json(capsys, "Bees make honey from nectar.", "-k", "1")
    assert ["Bees make honey from nectar."] == [h["text"] for h in hits]


def test_the_service_client_path_imports_neither_lancedb_nor_numpy(service, tmp_path):
    code = ("import sys; from propdex.cli import main; "
            "main(['search', 'Zebras live in herds.', '--json']); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'lancedb', 'numpy', 'prefect', 'torch', 'fastapi'}), file=sys.stderr)")
    env = {"PROPDEX_SERVER_URL": service, "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
           "PROPDEX_DB": str(tmp_path / "nothing")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    hits = json.loads(done.stdout)
    assert ("Zebras live in herds.", "[]") == (hits[0]["text"], done.stderr.strip())


# Authentication and binding -------------------------------------------------------------
@pytest.fixture(scope="module")
def guarded(db, scripted):
    env = {**embedding_environment(scripted), "PROPDEX_API_TOKEN": TOKEN}
    with running_service(db, env) as url:
        yield url


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401),
    ({"Authorization": "Bearer wrong-token"}, 401),
    ({"Authorization": TOKEN}, 401),
    ({"Authorization": f"Basic {TOKEN}"}, 401),
    ({"Authorization": f"Bearer {TOKEN}"}, 200),
])
@pytest.mark.parametrize("path", ["/health", "/documents", "/docs", "/openapi.json"])
def test_with_a_token_every_request_needs_it(guarded, headers, status, path):
    assert status == httpx.get(guarded + path, headers=headers).status_code


def test_a_search_with_the_token_is_answered(guarded):
    response = httpx.post(guarded + "/search", json={"query": "Honey keeps for years."},
                          headers={"Authorization": f"Bearer {TOKEN}"})
    assert "Honey keeps for years." == response.json()[0]["text"]


def test_the_cli_sends_the_token(guarded, cli_env, capsys, monkeypatch):
    monkeypatch.setenv("PROPDEX_SERVER_URL", guarded)
    monkeypatch.setenv("PROPDEX_API_TOKEN", TOKEN)
    assert ["Foxes eat berries."] == [h["text"] for h in cli_json(capsys, "Foxes eat berries.",
                                                                    "-k", "1")]


def test_the_cli_without_the_token_exits_2(guarded, cli_env, capsys, monkeypatch):
    monkeypatch.setenv("PROPDEX_SERVER_URL", guarded)
    assert 2 == main(["search", "owls", "--json"])
    assert "answered 401" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.com"])
def test_binding_beyond_loopback_without_a_token_exits_2(db, host):
    done = subprocess.run(
        [sys.executable, "-m", "propdex.cli", "serve", "--db", str(db), "--host", host,
         "--port", str(free_port())],
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
        timeout=120)
    assert (2, True) == (done.returncode, f"refusing to bind {host} without PROPDEX_API_TOKEN"
                         in done.stderr)


@pytest.mark.parametrize(("host", "expected"), [
    ("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.0.0.2", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.1", False), ("my-host", False),
])
def test_loopback_addresses(host, expected):
    assert expected == is_loopback(host)


# A commit while queries stream in --------------------------------------------------------
STREAM_QUERY = "gamma stream query"


def gamma(run_id: str, text: str):
    """A one-chunk version of gamma whose every vector is the stream query's."""
    v = version("gamma", run_id, [[text, text + " Again."]], "/corpus/gamma.md", "Gamma")
    for row in (*v.chunks, *v.propositions):
        row["vector"] = scripted_vector(STREAM_QUERY)
    return v


def test_commits_during_a_stream_of_queries_are_seen_whole_and_never_early(tmp_path, scripted):
    db = tmp_path / "db"
    index = Index.open(str(db), dim=DIM)
    index.replace_document(*gamma("v0", "Gamma version 0.").rows)
    with running_service(db, embedding_environment(scripted)) as url:
        answers: list[tuple[int, list[str]]] = []
        stop = threading.Event()

        def query() -> None:
            with httpx.Client(base_url=url, timeout=30) as client:
                while not stop.is_set():
                    r = client.post("/search", json={"query": STREAM_QUERY, "level": "both",
                                                     "k": 10})
                    answers.append((r.status_code, [h["text"] for h in r.json()]))

        threads = [threading.Thread(target=query) for _ in range(3)]
        for thread in threads:
            thread.start()
        for i in range(1, 7):
            index._append_rows(index.prepare_replacement(
                *gamma(f"open-{i}", f"UNCOMMITTED {i}.").rows))
            index.replace_document(*gamma(f"v{i}", f"Gamma version {i}.").rows)
        def newest_served() -> list[dict] | None:
            hits = httpx.post(url + "/search", json={"query": STREAM_QUERY, "k": 1}).json()
            return hits if hits[0]["chunk_text"].startswith("Gamma version 6.") else None

        after = wait_for(newest_served, timeout=10, interval=0.1,
                         what="the last commit to be served")
        stop.set()
        for thread in threads:
            thread.join()
    texts = {t for _, hits in answers for t in hits}
    # A hit is a committed proposition or, when a replacement removed a version's
    # propositions while its chunk was being ranked, that committed version's chunk.
    committed = {f"Gamma version {i}.{tail}" for i in range(7)
                 for tail in ("", " Again.", f" Gamma version {i}. Again.")}
    assert ({200}, set(), "Gamma version 6. Gamma version 6. Again.", True) == (
        {status for status, _ in answers}, texts - committed, after[0]["chunk_text"],
        len(answers) >= 6)


def test_objects_alive_when_serving_begins_are_left_out_of_full_collections():
    import gc

    from propdex.service.run import freeze_loaded_objects

    loaded = [{"row": i} for i in range(1_000)]  # as the loaded objects: alive from the start
    try:
        freeze_loaded_objects()
        walked = {id(o) for o in gc.get_objects()}
        assert (True, False) == (gc.get_freeze_count() >= len(loaded), id(loaded) in walked)
    finally:
        gc.unfreeze()  # the rest of the suite runs in this process
