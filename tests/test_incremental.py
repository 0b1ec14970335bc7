"""Incremental re-ingestion: pruning by folder, glob and path; same bytes under two paths;
and a run killed with SIGKILL that the next run finishes without repeating paid calls."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import lancedb
import pytest

from propdex.ids import doc_id_for
from propdex.store import Index
from tests.scripted_fixtures import SENTINEL_KEY
from tests.scripted_server import ScriptedServer

pytestmark = pytest.mark.prefect

REPO = Path(__file__).resolve().parents[1]


def _write_notes(folder: Path, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = folder / name
        path.write_text(f"# Notes {name}\n\nThe file {name} records that herons nest in tall "
                        f"trees near water. Herons eat fish and frogs.\n", encoding="utf-8")
        paths.append(path)
    return paths


def _sources(db: Path) -> set[str]:
    return {Path(d["source"]).name for d in Index.open(str(db), create=False).documents()}


def _ingest(sources: list[str], db: Path, **kwargs) -> dict:
    from flows.ingest import ingest

    # The summary also of a run that ends Failed (a named path that is gone): its report.
    state = ingest(sources=sources, db=str(db), return_state=True, **kwargs)
    return state.result(raise_on_failure=False)


def test_glob_prunes_files_it_no_longer_matches(tmp_path):
    a, b = _write_notes(tmp_path / "src", ["a.md", "b.md"])
    pattern = str(tmp_path / "src" / "*.md")
    _ingest([pattern], tmp_path / "db")
    b.unlink()

    summary = _ingest([pattern], tmp_path / "db")

    assert [str(b)] == summary["removed"]
    assert {"a.md"} == _sources(tmp_path / "db")


def test_explicit_path_that_disappeared_is_pruned(tmp_path):
    a, b = _write_notes(tmp_path / "src", ["a.md", "b.md"])
    _ingest([str(a), str(b)], tmp_path / "db")
    b.unlink()

    summary = _ingest([str(a), str(b)], tmp_path / "db")

    assert [str(b)] == summary["removed"]


def test_no_prune_keeps_removed_sources(tmp_path):
    a, b = _write_notes(tmp_path / "src", ["a.md", "b.md"])
    _ingest([str(tmp_path / "src")], tmp_path / "db")
    b.unlink()

    summary = _ingest([str(tmp_path / "src")], tmp_path / "db", prune_removed=False)

    assert [] == summary["removed"]
    assert {"a.md", "b.md"} == _sources(tmp_path / "db")


def test_same_bytes_under_two_paths_are_two_documents(tmp_path):
    (first,) = _write_notes(tmp_path / "one", ["same.md"])
    second = tmp_path / "two" / "same.md"
    second.parent.mkdir()
    second.write_bytes(first.read_bytes())

    _ingest([str(first), str(second)], tmp_path / "db")
    conn = lancedb.connect(str(tmp_path / "db"))
    chunks = conn.open_table("chunks").to_arrow().to_pylist()

    assert {doc_id_for(str(first)), doc_id_for(str(second))} == {c["doc_id"] for c in chunks}
    assert len(chunks) == len({c["chunk_id"] for c in chunks})


def _cached_proposition_answers(db: Path) -> int:
    with sqlite3.connect(db / "_cache" / "results.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM llm WHERE step = 'propositions'").fetchone()[0]


def _partial_documents(db: Path) -> list[str]:
    """Documents a search could see only partly: live rows disagreeing with the ledger."""
    if not (db / "documents.lance").exists():
        return []
    index = Index.open(str(db), create=False)
    partial = []
    for doc in index.documents():
        if doc["run_id"] is None:
            continue
        chunks = index.live_rows("chunks", ["chunk_id"], doc["doc_id"])
        props = index.live_rows("propositions", ["prop_id"], doc["doc_id"])
        if (len(chunks), len(props)) != (doc["chunk_count"], doc["proposition_count"]):
            partial.append(doc["source"])
    return partial


def test_sigkill_mid_run_resumes_without_repeating_paid_calls(tmp_path):
    pages = "\n\n".join(
        f"Paragraph {i}: the lighthouse keeper logged {i} ships passing the northern reef "
        f"during the winter of {1900 + i}." for i in range(60)
    )
    sources = []
    for n in range(3):
        path = tmp_path / "src" / f"log{n}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"Keeper's log {n}\n\n{pages}\n", encoding="utf-8")
        sources.append(path)
    db = tmp_path / "db"
    # 50 ms a call: the ~50 proposition calls left after the 40th (where the loop below kills)
    # and the gradings still take seconds, while the ~190 calls of both runs cost ~5 s.
    with ScriptedServer(latency_ms=50) as server:
        env = dict(os.environ, PROPDEX_LLM="openai", PROPDEX_LLM_BASE_URL=server.url + "/v1",
                   PROPDEX_LLM_API_KEY=SENTINEL_KEY, PROPDEX_LLM_MODEL="scripted-model",
                   PROPDEX_EMBEDDER="openai", PROPDEX_EMBED_MODEL="scripted-embed",
                   PROPDEX_CHUNK_SIZE="300", PROPDEX_LLM_CONCURRENCY="2",
                   PROPDEX_DOCUMENT_CONCURRENCY="1")
        command = [sys.executable, "-m", "propdex.cli", "ingest", str(tmp_path / "src"),
                   "--db", str(db)]
        run = subprocess.Popen(command, env=env, cwd=REPO, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        partial_seen = []
        deadline = time.monotonic() + 240
        # Kill about half-way through the ~90 chunks' proposition calls.
        while time.monotonic() < deadline and run.poll() is None:
            partial_seen += _partial_documents(db)
            if server.calls("propositions") >= 40:
                break
            time.sleep(0.2)
        assert run.poll() is None, f"the run ended before it could be killed: {run.stderr.read()!r}"
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        paid = _cached_proposition_answers(db)
        calls_before = server.calls("propositions")
        partial_seen += _partial_documents(db)

        finished = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                                  timeout=600)
        resumed_calls = server.calls("propositions") - calls_before

    chunks = Index.open(str(db), create=False).read("chunks", ["chunk_id", "doc_id", "run_id"])
    documents = Index.open(str(db), create=False).documents()
    live = {d["doc_id"]: d["run_id"] for d in documents}
    total_chunks = sum(1 for c in chunks if live.get(c["doc_id"]) == c["run_id"])
    assert 0 == finished.returncode, finished.stderr
    assert [] == partial_seen
    assert 0 < paid < total_chunks
    assert total_chunks - paid == resumed_calls
    assert {"indexed"} == {d["status"] for d in documents}
    assert [] == Index.open(str(db), create=False).verify()


def test_force_runs_every_stage_again(tmp_path):
    # Not the stage results stored by the first run: --force is how a user has a document
    # read again (after a PyMuPDF upgrade, say), which Prefect's task cache would skip.
    (notes,) = _write_notes(tmp_path / "src", ["a.md"])
    _ingest([str(notes)], tmp_path / "db")

    summary = _ingest([str(notes)], tmp_path / "db", force=True)

    (outcome,) = summary["documents"]
    assert ("forced", {"extract", "context", "chunk", "propositions", "embed"}) == (
        outcome["reason"], set(outcome["stage_seconds"]))


def test_stage_results_of_an_earlier_run_count_as_cached_calls(tmp_path, llm_env):
    # Back to the first run's chunk size: Prefect's task cache returns that run's stage
    # results, so no LLM call reaches the server, and the report must not bill any.
    from flows.parameters import IngestOptions

    (notes,) = _write_notes(tmp_path / "src", ["a.md"])
    first = _ingest([str(notes)], tmp_path / "db", options=IngestOptions(chunk_size=300))
    _ingest([str(notes)], tmp_path / "db", options=IngestOptions(chunk_size=400))
    calls_before_third = llm_env.calls()
    again = _ingest([str(notes)], tmp_path / "db", options=IngestOptions(chunk_size=300))

    (paid,) = first["documents"]
    (reused,) = again["documents"]
    assert 0 == llm_env.calls() - calls_before_third
    assert (0, paid["llm_calls"] + paid["cached_llm_calls"], 0, 0) == (
        reused["llm_calls"], reused["cached_llm_calls"], reused["prompt_tokens"],
        reused["embeddings_computed"])
