"""A 400-page PDF ingests whole (offline backend): the ledger records every page and the last
page's text is chunked and cited on that page. (Extraction memory is measured by bench/, not
asserted here.)"""

from __future__ import annotations

import contextlib
import io
import json

import lancedb
import pytest

from propdex.cli import main
from tests.pdf_factory import make_pdf

pytestmark = pytest.mark.prefect

PAGES = 400


def page_text(number: int) -> str:
    return f"Logbook page {number} records drill core sample {number} from the basalt plateau."


@pytest.fixture(scope="module")
def large_run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("large")
    pdf = make_pdf(root / "logbook.pdf", [page_text(n) for n in range(1, PAGES + 1)])
    db = str(root / "db")
    ingest_out, status_out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(ingest_out):
        code = main(["ingest", str(pdf), "--db", db, "--json"])
    with contextlib.redirect_stdout(status_out):
        main(["status", "--db", db, "--json"])
    chunks = lancedb.connect(db).open_table("chunks").to_arrow().to_pylist()
    return {"code": code, "summary": json.loads(ingest_out.getvalue()),
            "status": json.loads(status_out.getvalue()), "chunks": chunks}


def test_the_large_pdf_is_indexed(large_run):
    assert (0, ["indexed"]) == (large_run["code"], [d["status"] for d in large_run["summary"]["documents"]])


def test_the_ledger_records_every_page(large_run):
    (row,) = large_run["status"]
    assert PAGES == row["page_count"]


def test_the_last_page_is_chunked_and_cited_on_that_page(large_run):
    last = [c for c in large_run["chunks"] if page_text(PAGES) in c["text"]]
    assert [PAGES] == [c["page_end"] for c in last]
