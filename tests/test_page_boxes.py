"""Page boxes in lineage: chunks.boxes and propositions.boxes, returned by every search
surface (CLI --json, Python API, HTTP, MCP); null for non-PDF sources and for older indexes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import anyio
import lancedb
import pyarrow as pa
import pymupdf
import pytest
from fastapi.testclient import TestClient

from propdex.api import IndexReader
from propdex.cli import main
from propdex.search import search
from propdex.service.app import create_app
from propdex.settings import Settings
from propdex.store import Index
from propdex.store.schema import CHUNKS, DOCUMENTS, DOCUMENTS_SCHEMA, PROPOSITIONS, schema_for
from tests.pdf_factory import make_table_pdf
from tests.service_harness import REPO
from tests.store_rows import DIM, axis, make_version

QUERY = "Quartz is the hardest of the four"


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("sources")
    pdf = make_table_pdf(folder / "minerals.pdf")
    (folder / "notes.md").write_text("# Notes\n\nQuartz scratches glass.\n", encoding="utf-8")
    db = str(tmp_path_factory.mktemp("db") / "index")
    with contextlib.redirect_stdout(io.StringIO()):
        assert 0 == main(["ingest", str(folder), "--db", db])
    conn = lancedb.connect(db)
    tables = {name: conn.open_table(name).to_arrow().to_pylist()
              for name in (DOCUMENTS, CHUNKS, PROPOSITIONS)}
    with pymupdf.open(pdf) as doc:
        page = doc[0].rect
    return {"db": db, "pdf": str(pdf), "page": page, **tables}


pytestmark = pytest.mark.prefect


def of(rows: list[dict], suffix: str) -> list[dict]:
    return [r for r in rows if r["source"].endswith(suffix)]


def test_pdf_chunks_have_boxes_within_their_page(ingested) -> None:
    page = ingested["page"]
    boxes = [b for c in of(ingested[CHUNKS], ".pdf") for b in c["boxes"]]
    assert boxes and all(
        b["page"] == 1 and pymupdf.Rect(b["x0"], b["y0"], b["x1"], b["y1"]) in page
        for b in boxes
    )


def test_markdown_chunks_have_no_boxes(ingested) -> None:
    chunks = of(ingested[CHUNKS], ".md")
    assert [None] * len(chunks) == [c["boxes"] for c in chunks] and chunks


def _inside(box: dict, boxes: list[dict]) -> bool:
    rect = pymupdf.Rect(box["x0"], box["y0"], box["x1"], box["y1"])
    return any(rect in pymupdf.Rect(b["x0"], b["y0"], b["x1"], b["y1"]) for b in boxes)


def test_propositions_carry_their_chunks_boxes_or_their_table_rows(ingested) -> None:
    boxes = {c["chunk_id"]: c["boxes"] for c in ingested[CHUNKS]}
    props = ingested[PROPOSITIONS]
    # A statement of one table row carries that row's box (tests/test_tables.py).
    assert props and all(
        p["boxes"] == boxes[p["chunk_id"]]
        or (p["boxes"] and len(p["boxes"]) == 1 and _inside(p["boxes"][0], boxes[p["chunk_id"]]))
        for p in props
    )


def test_documents_row_records_the_pdf_reader(ingested) -> None:
    assert {"minerals.pdf": ("layout", None), "notes.md": (None, None)} == {
        Path(d["source"]).name: (d["pdf_reader"], d["layout_fallback_pages"])
        for d in ingested[DOCUMENTS]
    }


def test_cli_search_json_returns_the_boxes(ingested) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["search", QUERY, "--db", ingested["db"], "--json", "--level", "chunks"])
    hit = next(r for r in json.loads(out.getvalue()) if r["source"].endswith(".pdf"))
    [chunk] = [c for c in ingested[CHUNKS] if c["chunk_id"] == hit["chunk_id"]]
    assert chunk["boxes"] == hit["boxes"]


def test_api_search_returns_the_propositions_boxes(ingested) -> None:
    reader = IndexReader(Settings(db=ingested["db"]))
    hit = next(r for r in reader.search(QUERY, level="propositions")
               if r.source.endswith(".pdf"))
    [prop] = [p for p in ingested[PROPOSITIONS] if p["prop_id"] == hit.prop_id]
    assert prop["boxes"] == hit.boxes


def test_http_search_and_chunk_return_the_boxes(ingested) -> None:
    client = TestClient(create_app(IndexReader(Settings(db=ingested["db"]))))
    hits = client.post("/search", json={"query": QUERY, "level": "chunks"}).json()
    hit = next(r for r in hits if r["source"].endswith(".pdf"))
    chunk = client.get(f"/chunks/{hit['chunk_id']}").json()
    assert (hit["boxes"], hit["boxes"]) == (
        chunk["boxes"], chunk["propositions"][0]["boxes"]
    ) and hit["boxes"]



def test_mcp_search_and_get_chunk_return_the_boxes(ingested) -> None:
    client = pytest.importorskip(
        "mcp.client.client", reason="the optional 'mcp' extra is not installed (pip install mcp)")
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "propdex.cli", "mcp", "--db", ingested["db"]],
        env={**os.environ, "PYTHONPATH": str(REPO)})

    async def session() -> tuple[list[dict], dict]:
        async with client.Client(server, read_timeout_seconds=120) as mcp:
            found = await mcp.call_tool("search", {"query": QUERY, "level": "propositions"})
            hit = next(r for r in found.structured_content["result"]
                       if r["source"].endswith(".pdf"))
            chunk = await mcp.call_tool("get_chunk", {"chunk_id": hit["chunk_id"]})
            return hit, chunk.structured_content
    hit, chunk = anyio.run(session)
    [prop] = [p for p in ingested[PROPOSITIONS] if p["prop_id"] == hit["prop_id"]]
    [stored] = [c for c in ingested[CHUNKS] if c["chunk_id"] == hit["chunk_id"]]
    assert (prop["boxes"], stored["boxes"]) == (hit["boxes"], chunk["boxes"]) and hit["boxes"]


# An index an older propdex wrote: no boxes columns, until its next write adds them.

def _old_index(path: Path) -> str:
    uri = str(path / "old")
    version = make_version("alpha", "r1", ["Owls hunt small mammals at night."],
                           props={0: ["Owls hunt at night."]}, chunk_vectors={0: axis(0)},
                           prop_vectors={(0, 0): axis(0)})
    document, chunks, props = version.rows
    db = lancedb.connect(uri)
    for name, rows in ((DOCUMENTS, [document]), (CHUNKS, chunks), (PROPOSITIONS, props)):
        full = DOCUMENTS_SCHEMA if name == DOCUMENTS else schema_for(name, DIM)
        old = pa.schema([f for f in full if f.name not in ("boxes", "pdf_reader",
                                                           "layout_fallback_pages")])
        db.create_table(name, data=pa.Table.from_pylist(rows, schema=old), schema=old)
    return uri


@pytest.mark.parametrize("level", ["chunks", "propositions"])
def test_an_older_index_is_searched_with_null_boxes(tmp_path, level: str) -> None:
    index = Index.open(_old_index(tmp_path), create=False)
    [hit] = search(index, "owls", axis(0), mode="vector", level=level, k=1)
    assert ("alpha", None) == (hit.doc_id, hit.boxes)


@pytest.fixture(scope="module")
def fell_back(tmp_path_factory) -> str:
    """An index with a PDF whose page 2 the layout engine failed on."""
    db = str(tmp_path_factory.mktemp("fallback") / "index")
    version = make_version("survey", "r1", ["Rivers.", "Mountains.", "Deserts."],
                           source="/corpus/survey.pdf")
    version.document.update(pdf_reader="layout", layout_fallback_pages=[2])
    Index.open(db, dim=DIM).replace_document(*version.rows)
    return db


def test_status_names_the_pages_the_layout_engine_failed_on(fell_back) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["status", "--db", fell_back])
    assert "  [layout engine failed on page(s) 2: read in fast mode]" in out.getvalue()


def test_http_documents_list_the_reader_and_the_pages_the_engine_failed_on(fell_back) -> None:
    client = TestClient(create_app(IndexReader(Settings(db=fell_back))))
    [row] = client.get("/documents").json()
    assert ("layout", [2]) == (row["pdf_reader"], row["layout_fallback_pages"])
