"""`propdex mcp`: the search and get_chunk tools called through the mcp client over stdio."""

from __future__ import annotations

import os
import sys

import anyio
import pytest

from propdex.store import Index
from tests.service_harness import (
    E5,
    REPO,
    embedding_environment,
    half_reembedded_index,
    version,
)
from tests.store_rows import DIM

mcp_client = pytest.importorskip(
    "mcp.client.client", reason="the optional 'mcp' extra is not installed (pip install mcp)")
from mcp.client.stdio import StdioServerParameters  # noqa: E402


def calls_to(db, scripted):
    """A function running tool calls against one `propdex mcp --db DB` process; it returns
    the tool names and the calls' results."""
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "propdex.cli", "mcp", "--db", str(db)],
        env={**os.environ, **embedding_environment(scripted), "PYTHONPATH": str(REPO)})

    def run(*requests: tuple[str, dict]) -> list:
        async def session() -> list:
            async with mcp_client.Client(server, read_timeout_seconds=120) as client:
                tools = await client.list_tools()
                results = [sorted(t.name for t in tools.tools)]
                for name, arguments in requests:
                    results.append(await client.call_tool(name, arguments))
                return results
        return anyio.run(session)
    return run


@pytest.fixture(scope="module")
def calls(tmp_path_factory, scripted):
    """Runs tool calls against one `propdex mcp` process; returns their results."""
    db = tmp_path_factory.mktemp("mcp") / "db"
    Index.open(str(db), dim=DIM).replace_document(*version(
        "kite", "r1", [["Kites fly on windy days.", "Kite lines are strong."],
                       ["Box kites have cells."]], "/corpus/kites.md", "Kites").rows)
    return calls_to(db, scripted)


def test_the_tools_search_and_fetch_a_chunk_to_cite(calls):
    tools, found, chunk, missing, bad = calls(
        ("search", {"query": "Box kites have cells.", "k": 2}),
        ("get_chunk", {"chunk_id": "kite:c0"}),
        ("get_chunk", {"chunk_id": "kite:c7"}),
        ("search", {"query": "kites", "k": 500}),
    )
    hits = found.structured_content["result"]
    assert (
        ["get_chunk", "search"],
        ("Box kites have cells.", "kite:c1", "Kites", "/corpus/kites.md", 2),
        ("Kites fly on windy days. Kite lines are strong.", ["kite:c0:p0", "kite:c0:p1"]),
        (True, True), (True, True),
    ) == (
        tools,
        (hits[0]["text"], hits[0]["chunk_id"], hits[0]["title"], hits[0]["source"],
         hits[0]["page_start"]),
        (chunk.structured_content["text"],
         [p["prop_id"] for p in chunk.structured_content["propositions"]]),
        (missing.is_error, "no live chunk 'kite:c7'" in missing.content[0].text),
        (bad.is_error, "k" in bad.content[0].text),
    )


def test_a_bad_search_is_an_error_result_naming_the_field(calls):
    _, spaces, text_k = calls(("search", {"query": "   "}),
                              ("search", {"query": "kites", "k": "3"}))
    assert ((True, True), (True, True)) == (
        (spaces.is_error, "query" in spaces.content[0].text),
        (text_k.is_error, "k" in text_k.content[0].text))


def test_a_search_without_an_index_is_an_error_result_naming_it(tmp_path, scripted):
    _, found = calls_to(tmp_path / "db", scripted)(("search", {"query": "kites"}))
    assert (True, True) == (found.is_error, f"no index at {tmp_path / 'db'}: " in found.content[0].text)


def test_a_damaged_table_is_an_error_result_naming_it(tmp_path, scripted):
    db = tmp_path / "db"
    Index.open(str(db), dim=DIM).replace_document(*version(
        "kite", "r1", [["Kites fly on windy days."]], "/corpus/kites.md", "Kites").rows)
    data = next((db / "chunks.lance" / "data").glob("*.lance"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    _, found = calls_to(db, scripted)(("search", {"query": "kites", "level": "chunks"}))
    assert (True, True) == (
        found.is_error, f"cannot read table chunks in the index at {db}: " in found.content[0].text)


def test_a_search_of_a_half_re_embedded_index_says_what_it_searched_by_text_only(
        tmp_path, scripted):
    half_reembedded_index(tmp_path / "db")
    _, found = calls_to(tmp_path / "db", scripted)(("search", {"query": "Bees make honey"}))
    left_out = found.structured_content["result"][0]["vector_left_out"]
    assert (False, {E5: 1}, True) == (
        found.is_error, left_out["embed_models"],
        "were searched by full text only" in found.content[0].text)
