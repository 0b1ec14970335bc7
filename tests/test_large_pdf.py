"""A long PDF ingests whole (offline backend): the ledger records every page and the last
page's text is chunked and cited on that page. (Extraction memory is measured by bench/, not
asserted here.)

The fast reader takes the full 400 pages. The layout reader reads a PDF one page at a time
(``propdex.extract.engine.read_page``) at about a hundred times the fast reader's cost per
page, so it runs on 12 pages: enough for its cross-page steps (furniture, paragraphs rejoined
across pages, page spans) over a document of many pages, at a third of the suite's time that
40 pages took."""

from __future__ import annotations

import contextlib
import io
import json

import lancedb
import pytest

from propdex.cli import main
from tests.pdf_factory import make_pdf

pytestmark = pytest.mark.prefect

PAGES = {"fast": 400, "layout": 12}  # reader -> pages of the PDF it ingests


def page_text(number: int) -> str:
    return f"Logbook page {number} records drill core sample {number} from the basalt plateau."


@pytest.fixture(scope="module", params=sorted(PAGES))
def large_run(request, tmp_path_factory) -> dict:
    reader, pages = request.param, PAGES[request.param]
    root = tmp_path_factory.mktemp(f"large-{reader}")
    pdf = make_pdf(root / "logbook.pdf", [page_text(n) for n in range(1, pages + 1)])
    db = str(root / "db")
    ingest_out, status_out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(ingest_out):
        code = main(["ingest", str(pdf), "--db", db, "--pdf-reader", reader, "--json"])
    with contextlib.redirect_stdout(status_out):
        main(["status", "--db", db, "--json"])
    chunks = lancedb.connect(db).open_table("chunks").to_arrow().to_pylist()
    return {"pages": pages, "code": code, "summary": json.loads(ingest_out.getvalue()),
            "status": json.loads(status_out.getvalue()), "chunks": chunks}


def test_the_large_pdf_is_indexed(large_run):
    assert (0, ["indexed"]) == (large_run["code"], [d["status"] for d in large_run["summary"]["documents"]])


def test_the_ledger_records_every_page(large_run):
    (row,) = large_run["status"]
    assert large_run["pages"] == row["page_count"]


def test_the_last_page_is_chunked_and_cited_on_that_page(large_run):
    last_page = large_run["pages"]
    last = [c for c in large_run["chunks"] if page_text(last_page) in c["text"]]
    assert [last_page] == [c["page_end"] for c in last]
