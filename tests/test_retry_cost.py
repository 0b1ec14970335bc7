"""A degraded document's retry costs only what it retries: the PDF is not read again, the
LLM is asked only what failed (and what read a changed answer), and the index it leaves
equals a clean one-pass index. Against the scripted server, through the ingest flow."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

import lancedb
import pytest

from tests.pdf_factory import make_pdf
from tests.scripted_server import CHAT_PATH, EMBEDDINGS_PATH, ScriptedServer, malformed, reply
from tests.test_llm_pipeline import PAGES

pytestmark = pytest.mark.prefect

REJECTED_TITLE = reply(json.dumps({"title": "12345"}))  # no letters: the checks reject it
REJECTED_SUMMARY = reply(json.dumps({"summary": "12345"}))
# Accepted answers unlike the offline backend's fallbacks (its title and summary come from
# the first line and sentence, as the server's default answers do).
TITLE = reply(json.dumps({"title": "Facts about the Eiffel Tower"}))
SUMMARY = reply(json.dumps({"summary": "The Eiffel Tower in Paris is 330 metres tall and "
                                       "receives about seven million visitors every year."}))
# Columns that name the run or count what it paid, whatever it wrote.
RUN_COLUMNS = {"run_id", "last_run_id", "ingested_at", "last_attempt_at", "llm_calls",
               "prompt_tokens", "completion_tokens"}


@pytest.fixture
def llm_env(llm_env, monkeypatch):
    monkeypatch.setenv("PROPDEX_LLM_CONCURRENCY", "1")  # scripted answers reach the first chunk
    return llm_env


def _ingest(pdf: Path, db: Path, *, force: bool = False) -> dict:
    from flows.ingest import ingest

    return ingest(sources=[str(pdf)], db=str(db), force=force)


def _index(db: Path) -> dict[str, list[dict]]:
    """Every table's rows without the run's own columns, in a stable order."""
    connection = lancedb.connect(str(db))
    tables = {}
    for name in ("documents", "chunks", "propositions"):
        rows = connection.open_table(name).to_arrow().to_pylist()
        kept = [{k: v for k, v in row.items() if k not in RUN_COLUMNS} for row in rows]
        tables[name] = sorted(kept, key=lambda row: json.dumps(row, sort_keys=True, default=str))
    return tables


def _asked(server: ScriptedServer) -> Counter:
    """LLM requests by step."""
    return Counter(r.step for r in server.requests if r.path == CHAT_PATH)


def _embedded(server: ScriptedServer) -> int:
    """Texts sent to the embeddings endpoint."""
    return sum(len(r.body["input"]) for r in server.requests if r.path == EMBEDDINGS_PATH)


def _clean_index(pdf: Path, db: Path, server: ScriptedServer) -> dict[str, list[dict]]:
    server.script(TITLE, step="title")
    server.script(SUMMARY, step="summary")
    _ingest(pdf, db)
    server.reset()
    return _index(db)


def _stages_run(summary: dict) -> list[str]:
    """The stages the run's one document ran (a stage whose result came from Prefect's task
    cache records no time)."""
    return sorted(summary["documents"][0]["stage_seconds"])


def test_a_title_refused_again_costs_its_requests_alone(llm_env, tmp_path):
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    llm_env.script(REJECTED_TITLE, REJECTED_TITLE, step="title")
    _ingest(pdf, tmp_path / "db")
    first = _index(tmp_path / "db")
    llm_env.reset()

    llm_env.script(REJECTED_TITLE, REJECTED_TITLE, step="title")
    summary = _ingest(pdf, tmp_path / "db")

    assert ["retry"] == [d["reason"] for d in summary["documents"]]
    assert (Counter(title=2), 0, ["context"]) == (
        _asked(llm_env), _embedded(llm_env), _stages_run(summary))
    assert first == _index(tmp_path / "db")


def test_a_summary_retried_re_embeds_the_chunks_only_and_reads_the_pdf_once(llm_env, tmp_path):
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    clean = _clean_index(pdf, tmp_path / "clean-db", llm_env)
    llm_env.script(TITLE, step="title")
    llm_env.script(REJECTED_SUMMARY, REJECTED_SUMMARY, step="summary")
    _ingest(pdf, tmp_path / "db")
    chunks = len(clean["chunks"])
    llm_env.reset()

    llm_env.script(SUMMARY, step="summary")
    summary = _ingest(pdf, tmp_path / "db")

    # The header (title, summary, section) changed: the chunks are embedded again. The
    # propositions prompt carries the title and section, not the summary: nothing is asked.
    assert (Counter(summary=1), chunks, ["chunk", "context", "embed", "propositions"]) == (
        _asked(llm_env), _embedded(llm_env), _stages_run(summary))
    assert clean == _index(tmp_path / "db")


def test_a_title_retried_asks_again_what_reads_it_but_never_reads_the_pdf_again(llm_env, tmp_path):
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    clean = _clean_index(pdf, tmp_path / "clean-db", llm_env)
    llm_env.script(REJECTED_TITLE, REJECTED_TITLE, step="title")
    _ingest(pdf, tmp_path / "db")
    chunks = len(clean["chunks"])
    llm_env.reset()

    llm_env.script(TITLE, step="title")
    llm_env.script(SUMMARY, step="summary")
    summary = _ingest(pdf, tmp_path / "db")

    # The propositions prompt carries the title: each chunk's propositions are asked again,
    # and the grades of propositions that came out new.
    assert (Counter(title=1, summary=1, propositions=chunks, grading=chunks),
            ["chunk", "context", "embed", "propositions"]) == (
        _asked(llm_env), _stages_run(summary))
    assert clean == _index(tmp_path / "db")


def test_a_failed_chunk_retried_asks_that_chunk_alone(llm_env, tmp_path):
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    clean = _clean_index(pdf, tmp_path / "clean-db", llm_env)
    llm_env.script(TITLE, step="title")
    llm_env.script(SUMMARY, step="summary")
    llm_env.script(malformed(), malformed(), step="propositions")
    _ingest(pdf, tmp_path / "db")
    llm_env.reset()

    summary = _ingest(pdf, tmp_path / "db")

    assert (Counter(propositions=1, grading=1), ["embed", "propositions"]) == (
        _asked(llm_env), _stages_run(summary))
    assert clean == _index(tmp_path / "db")


def test_a_forced_run_runs_every_stage_again(llm_env, tmp_path):
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    _ingest(pdf, tmp_path / "db")

    summary = _ingest(pdf, tmp_path / "db", force=True)

    assert ["chunk", "context", "embed", "extract", "propositions"] == _stages_run(summary)


def test_a_cached_title_the_checks_now_reject_is_asked_again(llm_env, tmp_path):
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    clean = _clean_index(pdf, tmp_path / "clean-db", llm_env)
    llm_env.script(TITLE, step="title")
    llm_env.script(SUMMARY, step="summary")
    _ingest(pdf, tmp_path / "db")
    # The title as an earlier propdex, whose checks let it through, would have cached it.
    with closing(sqlite3.connect(tmp_path / "db" / "_cache" / "results.sqlite")) as cache, cache:
        cache.execute("UPDATE llm SET value = ? WHERE step = 'title'", (json.dumps("12345"),))
    llm_env.reset()

    llm_env.script(TITLE, step="title")
    _ingest(pdf, tmp_path / "db", force=True)

    assert 1 == _asked(llm_env)["title"]
    assert clean == _index(tmp_path / "db")


def test_the_cli_reads_early_the_pdfs_it_extracts_but_not_those_it_retries(tmp_path):
    from propdex.cli.main import _pdfs_to_read
    from propdex.pipeline.plan import Plan, WorkItem

    new, retried = (str(tmp_path / f"{name}.pdf") for name in ("new", "retried"))
    plan = Plan(fingerprint="f", to_process=[WorkItem(retried, "r", "1", "retry"),
                                             WorkItem(new, "n", "2", "new")])

    assert [new] == _pdfs_to_read([str(tmp_path)], plan, [])
