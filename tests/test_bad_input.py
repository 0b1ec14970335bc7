"""Bad input through the whole run (`propdex ingest`, offline backend): every file gets its
own status and reason in the documents table, the run summary and `status --json`; the
rest of the run goes on; the exit code says some failed; no traceback reaches the user;
and an indexed document that becomes unreadable stays searchable.

One ingest of a folder holding every kind of bad file is shared by the tests.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import lancedb
import pytest

from propdex.cli import main
from propdex.extract.pdf import tesseract_available
from tests.pdf_factory import make_blank_pdf, make_pdf, pdf_bytes

pytestmark = pytest.mark.prefect

GOOD_PAGES = [
    "The Great Barrier Reef is the largest coral reef system in the world. It lies in the "
    "Coral Sea off the coast of Queensland, Australia.",
    "The reef is made of almost three thousand individual reefs. It can be seen from outer space.",
]
TEXT = "Basalt is a fine-grained volcanic rock. It forms from the rapid cooling of lava.\n"

# file name -> (status, reason) expected in the documents table
EXPECTED = {
    "encrypted.pdf": ("failed", "encrypted: password required"),
    "truncated.pdf": ("failed", "corrupt PDF: Failed to open file as type pdf."),
    "garbage-after-header.pdf": ("failed", "corrupt PDF: Failed to open file as type pdf."),
    "empty.pdf": ("failed", "empty file (0 bytes)"),
    "image.pdf": ("failed", "not a PDF (starts with PNG signature)"),
    "text.pdf": ("failed", "not a PDF (plain text content)"),
    # With Tesseract installed, blank pages go through OCR first, which finds nothing.
    "blank.pdf": ("skipped", "no text layer (OCR found no text)" if tesseract_available() else "no text layer"),
    "reef.pdf": ("indexed", None),
    "basalt.txt": ("indexed", None),
    # Stored and printed with its bytes escaped: the index holds sources as UTF-8 text.
    "latin1-\\xe9t\\xe9.txt": ("failed", "file name is not valid UTF-8: rename the file to index it"),
}


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bad")
    make_pdf(folder / "encrypted.pdf", GOOD_PAGES, password="s3cret")
    whole = pdf_bytes(GOOD_PAGES)
    (folder / "truncated.pdf").write_bytes(whole[: len(whole) // 2])
    (folder / "garbage-after-header.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 50)
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "image.pdf").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    (folder / "text.pdf").write_text("just some words, not a PDF at all\n", encoding="utf-8")
    make_blank_pdf(folder / "blank.pdf")
    make_pdf(folder / "reef.pdf", GOOD_PAGES, title="The Great Barrier Reef")
    (folder / "basalt.txt").write_text(TEXT, encoding="utf-8")
    (folder / os.fsdecode(b"latin1-\xe9t\xe9.txt")).write_text(TEXT, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def run(bad_folder, tmp_path_factory) -> dict:
    db = tmp_path_factory.mktemp("db") / "index"
    out, err = io.StringIO(), io.StringIO()
    # capsys is function-scoped: the module's shared run captures its output itself.
    # The same file named twice (and again inside its folder) is one document.
    reef = str(bad_folder / "reef.pdf")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["ingest", str(bad_folder), reef, reef, "--db", str(db), "--json"])
    status_out = io.StringIO()
    with contextlib.redirect_stdout(status_out):
        main(["status", "--db", str(db), "--json"])
    return {
        "code": code, "out": out.getvalue(), "err": err.getvalue(), "db": db,
        "summary": json.loads(out.getvalue()), "status": json.loads(status_out.getvalue()),
    }


def _by_name(rows: list[dict]) -> dict[str, dict]:
    return {Path(row["source"]).name: row for row in rows}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_status_json_shows_each_status_and_reason(run, name):
    row = _by_name(run["status"])[name]
    assert EXPECTED[name] == (row["status"], row["error"])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_run_summary_records_each_status_and_reason(run, name):
    outcome = _by_name(run["summary"]["documents"])[name]
    assert EXPECTED[name] == (outcome["status"], outcome["error"] if outcome["status"] != "indexed" else None)


def test_exit_code_says_some_documents_failed(run):
    assert 1 == run["code"]


@pytest.mark.parametrize("name", [n for n, (status, _) in EXPECTED.items() if status != "indexed"])
def test_each_failure_is_printed_with_its_reason(run, name):
    status, reason = EXPECTED[name]
    lines = [line for line in run["err"].splitlines() if line.endswith(f"{name}: {status}: {reason}")]
    assert 1 == len(lines)


def test_no_traceback_reaches_the_user(run):
    assert "Traceback" not in run["out"] + run["err"]


def test_the_same_file_named_twice_is_one_document(run):
    assert 1 == sum(Path(row["source"]).name == "reef.pdf" for row in run["status"])


def test_good_documents_got_chunks_despite_the_bad_ones(run):
    chunks = lancedb.connect(str(run["db"])).open_table("chunks").to_arrow().to_pylist()
    assert {"reef.pdf", "basalt.txt"} == {Path(c["source"]).name for c in chunks}


def test_error_kind_of_bad_input_is_input_and_of_a_name_that_cannot_be_read_unreadable(run):
    table = lancedb.connect(str(run["db"])).open_table("documents").to_arrow().to_pylist()
    kinds = {Path(r["source"]).name: r["error_kind"] for r in table if r["status"] != "indexed"}
    unreadable = "latin1-\\xe9t\\xe9.txt"
    assert ({"input"}, "unreadable") == (
        {kind for name, kind in kinds.items() if name != unreadable}, kinds[unreadable])


def _indexed_reef(tmp_path: Path) -> tuple[Path, Path, str]:
    """A folder holding reef.pdf, ingested: (folder, the PDF, the database)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf = make_pdf(folder / "reef.pdf", GOOD_PAGES)
    db = str(tmp_path / "db")
    assert 0 == main(["ingest", str(folder), "--db", db])
    return folder, pdf, db


def test_a_document_that_became_unreadable_stays_searchable(tmp_path, capsys):
    folder, pdf, db = _indexed_reef(tmp_path)
    (folder / "reef.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 50)  # now corrupt

    code = main(["ingest", str(folder), "--db", db])
    capsys.readouterr()
    main(["search", "largest coral reef", "--db", db, "--level", "chunks", "--json"])
    hits = json.loads(capsys.readouterr().out)
    main(["status", "--db", db, "--json"])
    (row,) = json.loads(capsys.readouterr().out)

    assert 1 == code
    assert ("failed", "corrupt PDF: Failed to open file as type pdf.") == (row["status"], row["error"])
    assert str(pdf.resolve()) == hits[0]["source"]
    shutil.rmtree(folder)


def test_a_document_readable_again_is_indexed_again(tmp_path, capsys):
    # Its bytes never changed, but its failure was not about them: a FIFO stood in its place
    # (as a file made unreadable by its permissions), and it must not stay failed for good.
    folder, pdf, db = _indexed_reef(tmp_path)
    aside = pdf.rename(tmp_path / "reef.pdf")
    os.mkfifo(folder / "reef.pdf")
    assert 1 == main(["ingest", str(folder), "--db", db])
    (folder / "reef.pdf").unlink()
    aside.rename(folder / "reef.pdf")

    code = main(["ingest", str(folder), "--db", db])
    capsys.readouterr()
    main(["status", "--db", db, "--json"])
    (row,) = json.loads(capsys.readouterr().out)

    assert (0, "indexed", None) == (code, row["status"], row["error"])
