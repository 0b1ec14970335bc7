"""Metadata filters over HTTP (`propdex serve`) and MCP (`propdex mcp`), hostile ones too."""

from __future__ import annotations

import os
import sys

import anyio
import httpx
import pytest

from propdex.metadata import entries, parse_pairs, to_json
from propdex.store import Index
from tests.service_harness import REPO, embedding_environment, running_service, version
from tests.store_rows import DIM


def tagged(doc_id: str, fact: str, pairs: list[str]):
    v = version(doc_id, "r1", [[fact]], f"/corpus/{doc_id}.md", doc_id.title())
    meta = parse_pairs(pairs, "test")
    v.document.update(metadata=to_json(meta), meta=entries(meta))
    return v.rows


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("metadata-service") / "db"
    index = Index.open(str(path), dim=DIM)
    index.replace_document(*tagged("owls", "Owls hunt at night.", ["team=birds", "year=2024"]))
    index.replace_document(*tagged("foxes", "Foxes hunt at dusk.", ["team=mammals"]))
    return path


@pytest.fixture(scope="module")
def service(db, scripted):
    with running_service(db, embedding_environment(scripted)) as url:
        yield url


def doc_ids(response: httpx.Response) -> list[str]:
    return sorted(r["doc_id"] for r in response.json())


@pytest.mark.parametrize(("where", "expected"), [
    ({"team": "birds"}, ["owls"]),
    ({"team": ["birds"], "year": 2024}, ["owls"]),
    ({"team": "fish"}, []),
    ({"nokey": "birds"}, []),
    ({"team": "x') OR true --"}, []),
    ({"team": "birds', 'team=mammals"}, []),
    ({}, ["foxes", "owls"]),
])
def test_http_where_filters(service, where, expected):
    response = httpx.post(service + "/search", json={"query": "hunt", "where": where})
    assert (200, expected) == (response.status_code, doc_ids(response))


@pytest.mark.parametrize("where", [
    {"a=b": "x"},
    {"a\nb": "x"},
    {"k" * 65: "x"},
    {"team": "v" * 257},
    {"team": "a\x00b"},
    {"team": {"nested": "x"}},
    {f"k{i}": "v" for i in range(17)},
    {"team": [str(i) for i in range(17)]},
    "team=birds",
])
def test_a_bad_where_gets_422_naming_it(service, where):
    response = httpx.post(service + "/search", json={"query": "hunt", "where": where})
    assert (422, "where") == (response.status_code, response.json()["error"].split(".")[0][:5])


def test_mcp_search_takes_where(db, scripted):
    mcp_client = pytest.importorskip(
        "mcp.client.client", reason="the optional 'mcp' extra is not installed")
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "propdex.cli", "mcp", "--db", str(db)],
        env={**os.environ, **embedding_environment(scripted), "PYTHONPATH": str(REPO)})

    async def session() -> list:
        async with mcp_client.Client(server, read_timeout_seconds=120) as client:
            good = await client.call_tool("search", {"query": "hunt",
                                                     "where": {"team": "mammals"}})
            bad = await client.call_tool("search", {"query": "hunt", "where": {"a=b": "x"}})
            return [good, bad]

    good, bad = anyio.run(session)
    assert (["foxes"], True, True) == (
        [r["doc_id"] for r in good.structured_content["result"]], bad.is_error,
        "invalid key" in bad.content[0].text)
