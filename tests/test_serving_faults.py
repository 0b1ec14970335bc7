"""The serving surfaces on a bad day: bad searches, a missing, replaced or damaged index.

Every surface (the Python API, `propdex search`, the HTTP service, the MCP tool) refuses the
same bad search the same way, and says which index it cannot read instead of failing with
Lance's bare message or returning an empty list.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from propdex.api import open_index
from propdex.cli import main
from propdex.errors import IndexNotFoundError, SearchRequestError, StorageError
from propdex.store import Index
from tests.service_harness import embedding_environment, running_service, version
from tests.store_rows import DIM

OWLS = [["Owls hunt at night.", "Owls have silent feathers."], ["Barn owls nest in lofts."]]
HERONS = [["Herons wade in shallow water."]]

# Bad searches and the field each error names first.
BAD_SEARCHES = [
    ({"query": "   "}, "query"),
    ({"query": "owls", "k": 0}, "k"),
    ({"query": "owls", "k": 101}, "k"),
    ({"query": "owls " * 500}, "query"),
]


def build_index(path: Path, doc_id: str, facts: list[list[str]]) -> Path:
    Index.open(str(path), dim=DIM).replace_document(*version(
        doc_id, "r1", facts, f"/corpus/{doc_id}.md", doc_id.title()).rows)
    return path


def fts_doc_ids(db: Path, query: str) -> list[str]:
    return sorted({r.doc_id for r in open_index(str(db)).search(query, mode="fts")})


def truncate_a_data_file(db: Path, table: str) -> None:
    data = next((db / f"{table}.lance" / "data").glob("*.lance"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])


@pytest.fixture(scope="module")
def owls_db(tmp_path_factory) -> Path:
    return build_index(tmp_path_factory.mktemp("owls") / "db", "owls", OWLS)


@pytest.fixture
def cli_env(monkeypatch, scripted):
    for name, value in embedding_environment(scripted).items():
        monkeypatch.setenv(name, value)


# The same bad search on every surface ------------------------------------------------------
@pytest.mark.parametrize(("fields", "field"), BAD_SEARCHES)
def test_the_api_refuses_a_bad_search_naming_the_field(owls_db, fields, field):
    fields = dict(fields)
    query = fields.pop("query")
    with pytest.raises(SearchRequestError) as refused:
        open_index(str(owls_db)).search(query, mode="fts", **fields)
    assert field == str(refused.value).split(":")[0]


@pytest.mark.parametrize(("fields", "field"), BAD_SEARCHES)
def test_the_cli_refuses_a_bad_search_with_exit_2_and_a_json_error(owls_db, cli_env, capsys,
                                                                    fields, field):
    flags = ["-k", str(fields["k"])] if "k" in fields else []
    code = main(["search", fields["query"], "--db", str(owls_db), "--json", *flags])
    assert (2, field) == (code, json.loads(capsys.readouterr().out)["error"].split(":")[0])


def test_the_api_refuses_a_boolean_k(owls_db):
    with pytest.raises(SearchRequestError, match="^k: "):
        open_index(str(owls_db)).search("owls", mode="fts", k=True)


# A missing, removed or replaced index ------------------------------------------------------
def test_a_search_where_no_index_folder_exists_says_there_is_none(tmp_path):
    with pytest.raises(IndexNotFoundError, match=f"no index at {tmp_path / 'db'}"):
        open_index(str(tmp_path / "db")).search("owls", mode="fts")


def test_a_reader_whose_index_folder_was_removed_says_there_is_none(tmp_path):
    db = build_index(tmp_path / "db", "owls", OWLS)
    reader = open_index(str(db))
    reader.search("owls", mode="fts")
    shutil.rmtree(db)
    with pytest.raises(IndexNotFoundError, match=f"no index at {db}"):
        reader.search("owls", mode="fts")


def test_a_reader_serves_the_index_moved_in_place_of_its_own(tmp_path):
    db = build_index(tmp_path / "db", "owls", OWLS)
    reader = open_index(str(db))
    reader.search("owls", mode="fts")
    build_index(tmp_path / "next", "herons", HERONS)
    shutil.rmtree(db)
    (tmp_path / "next").rename(db)
    assert ["herons"] == sorted({r.doc_id for r in reader.search("herons", mode="fts")})


def test_a_truncated_data_file_is_a_storage_error_naming_the_table_and_index(tmp_path):
    db = build_index(tmp_path / "db", "owls", OWLS)
    truncate_a_data_file(db, "chunks")
    with pytest.raises(StorageError, match=f"cannot read table chunks in the index at {db}"):
        open_index(str(db)).search("owls", mode="fts", level="chunks")


def test_the_cli_exits_4_on_a_truncated_data_file(tmp_path, cli_env, capsys):
    db = build_index(tmp_path / "db", "owls", OWLS)
    truncate_a_data_file(db, "chunks")
    code = main(["search", "owls", "--db", str(db), "--mode", "fts", "--level", "chunks",
                 "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert (4, True) == (code, error.startswith(f"cannot read table chunks in the index at {db}"))


# The service -------------------------------------------------------------------------------
@pytest.fixture
def late_service(tmp_path, scripted):
    """A service started before any index exists at its --db."""
    db = tmp_path / "db"
    with running_service(db, embedding_environment(scripted)) as url:
        yield url, db


def test_a_service_started_before_its_index_answers_503_until_one_is_ingested(late_service):
    url, db = late_service
    before = httpx.post(url + "/search", json={"query": "Owls hunt at night.", "k": 1})
    build_index(db, "owls", OWLS)
    after = httpx.post(url + "/search", json={"query": "Owls hunt at night.", "k": 1})
    assert ((503, f"no index at {db}"), (200, ["owls"])) == (
        (before.status_code, before.json()["error"].split(":")[0]),
        (after.status_code, [r["doc_id"] for r in after.json()]))


# "No index" is exit 2 on both paths of `propdex search` (the exit-code table says so).
def test_the_cli_exits_2_where_no_index_folder_exists(tmp_path, cli_env, capsys):
    code = main(["search", "owls", "--db", str(tmp_path / "db"), "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert (2, f"no index at {tmp_path / 'db'}") == (code, error.split(":")[0])


def test_the_cli_exits_2_when_the_service_at_server_url_has_no_index(late_service, cli_env,
                                                                     capsys, monkeypatch):
    url, db = late_service
    monkeypatch.setenv("PROPDEX_SERVER_URL", url)
    code = main(["search", "owls", "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert (2, f"the service answered 503: no index at {db}") == (
        code, error.split(":", 2)[0] + ":" + error.split(":", 2)[1])


def test_a_retriever_asking_a_service_without_an_index_raises_index_not_found(late_service):
    from propdex.integrations.searches import Searcher

    url, db = late_service
    with pytest.raises(IndexNotFoundError, match=f"no index at {db}"):
        Searcher(db=None, url=url, token=None).search("owls", k=1, level="both",
                                                      mode="hybrid", where=None)


def test_the_service_answers_503_naming_a_damaged_table_and_stays_up(tmp_path, scripted):
    db = build_index(tmp_path / "db", "owls", OWLS)
    truncate_a_data_file(db, "chunks")
    with running_service(db, embedding_environment(scripted)) as url:
        response = httpx.post(url + "/search", json={"query": "owls", "level": "chunks"})
        health = httpx.get(url + "/health")
    assert ((503, True), 200) == (
        (response.status_code,
         response.json()["error"].startswith(f"cannot read table chunks in the index at {db}")),
        health.status_code)


@pytest.fixture(scope="module")
def owls_service(owls_db, scripted):
    with running_service(owls_db, embedding_environment(scripted)) as url:
        yield url


@pytest.mark.parametrize(("fields", "field"), [  # the bounds test_serve.py does not check
    ({"query": "   "}, "query"), ({"query": "owls", "k": True}, "k"),
    ({"query": "owls", "k": "3"}, "k")])
def test_the_service_refuses_a_bad_search_with_422_naming_the_field(owls_service, fields,
                                                                     field):
    response = httpx.post(owls_service + "/search", json=fields)
    assert (422, field) == (response.status_code, response.json()["error"].split(":")[0])


@pytest.mark.parametrize(("method", "path", "content"), [
    ("POST", "/search", b'{"query": "\xff\xfe owls"}'),
    ("GET", "/documents/nothing-here", b""),
    ("GET", "/search", b""),
])
def test_every_error_body_of_the_service_has_error(owls_service, method, path, content):
    response = httpx.request(method, owls_service + path, content=content,
                             headers={"Content-Type": "application/json"})
    assert (True, True) == (response.status_code >= 400, bool(response.json().get("error")))


@pytest.mark.parametrize("flags", [["-k", "abc"], ["--mode", "nearest"], ["--no-such-flag"]])
def test_the_cli_prints_a_json_error_for_a_malformed_command_given_json(tmp_path, capsys,
                                                                        flags):
    with pytest.raises(SystemExit) as ended:
        main(["search", "owls", "--db", str(tmp_path / "db"), "--json", *flags])
    out, err = capsys.readouterr()
    assert (2, json.loads(out)["error"]) == (ended.value.code, err.strip().splitlines()[-1]
                                             .split("error: ", 1)[1])


def test_a_malformed_command_without_json_prints_nothing_on_stdout(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["search", "owls", "--db", str(tmp_path / "db"), "-k", "abc"])
    assert "" == capsys.readouterr().out
