"""The live-documents map: read once per documents table version, fresh after any commit."""

from __future__ import annotations

import subprocess
import sys

from propdex.search.rankings import LanceReader
from propdex.store import Index
from tests.service_harness import REPO
from tests.store_rows import DIM, make_version


def committed(index: Index, doc_id: str, run_id: str) -> None:
    index.replace_document(*make_version(doc_id, run_id, [f"{doc_id} text {run_id}."]).rows)


def test_the_map_is_reused_while_the_documents_table_is_unchanged(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    committed(index, "a", "r1")
    first = index.live_documents()
    assert (True, {"a": "r1"}) == (index.live_documents() is first, first.runs)


def test_a_commit_by_another_writer_is_seen_by_the_next_read(tmp_path):
    reader = Index.open(str(tmp_path / "db"), dim=DIM)
    writer = Index.open(str(tmp_path / "db"), dim=DIM)
    committed(writer, "a", "r1")
    before = reader.live_documents().runs
    committed(writer, "a", "r2")
    committed(writer, "b", "r1")
    assert ({"a": "r1"}, {"a": "r2", "b": "r1"}) == (before, reader.live_documents().runs)


def test_a_commit_by_another_process_is_seen_by_the_next_read(tmp_path):
    db = tmp_path / "db"
    reader = Index.open(str(db), dim=DIM)
    committed(reader, "a", "r1")
    before = dict(reader.live_documents().runs)
    code = ("from propdex.store import Index; from tests.store_rows import DIM, make_version; "
            f"Index.open({str(db)!r}, dim=DIM).replace_document("
            "*make_version('a', 'r2', ['a text r2.']).rows)")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=300)
    assert ({"a": "r1"}, {"a": "r2"}) == (before, reader.live_documents().runs)


def test_failures_and_removals_leave_the_map(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    committed(index, "kept", "r1")
    committed(index, "gone", "r1")
    index.record_failure({"doc_id": "new", "source": "/corpus/new.pdf", "status": "failed",
                          "error": "encrypted"})
    before = set(index.live_documents().runs)
    index.delete_documents(["gone"])
    assert ({"kept", "gone"}, {"kept": "r1"}) == (before, index.live_documents().runs)


def test_a_missing_database_has_no_live_documents(tmp_path):
    index = Index.open(str(tmp_path / "nothing"), create=False)
    assert ({}, False) == (index.live_documents().runs, (tmp_path / "nothing").exists())


def test_a_readers_map_is_reused_until_a_commit_changes_it(tmp_path):
    writer = Index.open(str(tmp_path / "db"), dim=DIM)
    committed(writer, "a", "r1")
    reader = LanceReader(writer.uri)
    first = reader.live_documents()
    same = reader.live_documents()
    committed(writer, "b", "r1")
    assert (True, {"a": "r1", "b": "r1"}) == (same is first, reader.live_documents().runs)
