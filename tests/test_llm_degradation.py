"""Graceful degradation through the ingest flow against the scripted server: a failed title
or summary falls back to the offline backend's, a failed grading keeps its propositions
ungraded; both are recorded in lineage and the run report, and retried on the next run."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import pytest

from propdex.llm.offline_rules.summaries import make_summary
from propdex.pipeline.outcome import DocumentOutcome, RunSummary
from propdex.pipeline.report import render_markdown
from tests.pdf_factory import make_pdf
from tests.scripted_fixtures import scripted_environment, scripted_run_environment
from tests.scripted_server import ScriptedServer, malformed
from tests.test_llm_pipeline import PAGES, _ingest

pytestmark = pytest.mark.prefect


@pytest.fixture
def llm_env(llm_env, monkeypatch):
    monkeypatch.setenv("PROPDEX_LLM_CONCURRENCY", "1")  # scripted answers reach the first chunk
    return llm_env


def _rows(db: Path, table: str) -> list[dict]:
    rows = lancedb.connect(str(db)).open_table(table).to_arrow().to_pylist()
    if table == "documents":
        return rows
    live = {d["doc_id"]: d["run_id"] for d in _rows(db, "documents")}
    return [r for r in rows if live.get(r["doc_id"]) == r["run_id"]]


CUT_OFF_SUMMARY = {"PROPDEX_LLM_MAX_TOKENS": json.dumps({"summary": 5}),
                   "PROPDEX_LLM_CONCURRENCY": "1"}


@pytest.fixture(scope="module")
def summary_cut_off_db(tmp_path_factory) -> Path:
    """The index of one ingest whose summary answer is cut off at a 5-token cap (the tests
    reading it only read)."""
    root = tmp_path_factory.mktemp("summary-cut-off")
    with scripted_run_environment(**CUT_OFF_SUMMARY):
        _ingest([make_pdf(root / "eiffel.pdf", PAGES)], root / "db")
    return root / "db"


@pytest.fixture(scope="module")
def grading_failed_db(tmp_path_factory) -> Path:
    """The index of one ingest whose first chunk's grading stays invalid after its repair
    (the tests reading it only read)."""
    root = tmp_path_factory.mktemp("grading-failed")
    with scripted_run_environment(PROPDEX_LLM_CONCURRENCY="1") as server:
        server.script(malformed(), malformed(), step="grading")
        _ingest([make_pdf(root / "eiffel.pdf", PAGES)], root / "db")
    return root / "db"


def test_a_cut_off_summary_falls_back_and_the_document_is_indexed_whole(summary_cut_off_db):
    document = _rows(summary_cut_off_db, "documents")[0]

    assert "indexed" == document["status"]
    assert document["context_fallback"].startswith(
        "summary: offline fallback (summary: invalid answer after one repair: answer cut off at its "
        "output cap (max_tokens=5, finish_reason=length))")
    assert document["chunk_count"] > 0 and document["proposition_count"] > 0


def test_the_fallback_summary_is_the_offline_backends(summary_cut_off_db):
    document = _rows(summary_cut_off_db, "documents")[0]

    assert make_summary(document["text"], document["title"]) == document["summary"]


def test_a_fallback_is_retried_next_run_paying_only_the_failed_call(llm_env, tmp_path, monkeypatch):
    db = tmp_path / "db"
    monkeypatch.setenv("PROPDEX_LLM_MAX_TOKENS", json.dumps({"summary": 5}))
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    _ingest([pdf], db)
    llm_env.reset()

    monkeypatch.delenv("PROPDEX_LLM_MAX_TOKENS")
    summary = _ingest([pdf], db)
    document = _rows(db, "documents")[0]

    assert ["retry"] == [d["reason"] for d in summary["documents"]]
    assert (None, 1, 1) == (document["context_fallback"], llm_env.calls("summary"), llm_env.calls())


def test_a_failed_grading_keeps_its_propositions_ungraded(grading_failed_db):
    chunk = next(c for c in _rows(grading_failed_db, "chunks") if c["prop_error"])
    kept = [p for p in _rows(grading_failed_db, "propositions") if p["chunk_id"] == chunk["chunk_id"]]

    assert chunk["prop_error"].startswith("grading: grading: invalid answer after one repair")
    assert kept
    assert [(False, None, None)] * len(kept) == [(p["passed"], p["accuracy"], p["conciseness"]) for p in kept]


def test_ungraded_propositions_are_counted_in_the_documents_row(grading_failed_db):
    document = _rows(grading_failed_db, "documents")[0]
    ungraded = [p for p in _rows(grading_failed_db, "propositions") if p["accuracy"] is None]

    assert (len(ungraded), 0) == (document["ungraded_count"], document["chunk_failures"])
    assert document["passed_count"] == document["proposition_count"] - len(ungraded)


def test_ungraded_propositions_are_regraded_next_run(llm_env, tmp_path):
    db = tmp_path / "db"
    llm_env.script(malformed(), malformed(), step="grading")
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    _ingest([pdf], db)
    llm_env.reset()

    summary = _ingest([pdf], db)

    assert ["retry"] == [d["reason"] for d in summary["documents"]]
    assert (1, 1, 0) == (llm_env.calls("grading"), llm_env.calls(), _rows(db, "documents")[0]["ungraded_count"])


def test_the_run_report_names_the_fallback_and_the_ungraded_propositions(llm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("PROPDEX_LLM_MAX_TOKENS", json.dumps({"summary": 5}))
    llm_env.script(malformed(), malformed(), step="grading")
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    summary = _ingest([pdf], tmp_path / "db")
    outcome = summary["documents"][0]

    assert outcome["context_fallback"].startswith("summary: offline fallback")
    assert outcome["propositions_ungraded"] == summary["totals"]["propositions_ungraded"] > 0


def test_the_report_lists_fallbacks_and_the_structured_output_once():
    docs = [DocumentOutcome(source=f"/d/{n}.pdf", doc_id=n, status="indexed", propositions_ungraded=2,
                            context_fallback="summary: offline fallback (cut off)",
                            structured_output=["m: json_object+schema"]) for n in "ab"]
    markdown = render_markdown(RunSummary(run_id="r", db="/db", llm="openai", documents=docs))

    assert 1 == markdown.count("Structured output: m: json_object+schema")
    assert "- /d/a.pdf: summary: offline fallback (cut off)" in markdown
    assert "| /d/a.pdf | indexed |  | 0 | 0 | 0 | 2 | 0 | 0 |  |" in markdown


def test_a_server_refusing_json_schema_is_reported_once_in_the_run(tmp_path, monkeypatch):
    with ScriptedServer(refused_formats=("json_schema",)) as server:
        for name, value in scripted_environment(server).items():
            monkeypatch.setenv(name, value)
        pdfs = [make_pdf(tmp_path / f"{n}.pdf", PAGES) for n in ("a", "b")]
        summary = _ingest(pdfs, tmp_path / "db")

    assert 1 == len(summary["structured_output"])
    assert summary["structured_output"][0].startswith("scripted-model: json_object+schema (refused: json_schema+bounds")
    assert ["indexed", "indexed"] == [d["status"] for d in summary["documents"]]


def test_a_runaway_answer_is_stopped_at_its_cap_and_nothing_of_it_is_stored(llm_env, tmp_path, monkeypatch):
    runaway = json.dumps({"propositions": [f"Proposition {i} of a rambling model." for i in range(2000)]})
    llm_env.responder = lambda step, body: runaway if step == "propositions" else None
    monkeypatch.setenv("PROPDEX_MAX_PROPOSITIONS", "10")
    source = tmp_path / "harbour.txt"
    source.write_text("The authority employs 310 people at the port.\n", encoding="utf-8")
    _ingest([source], tmp_path / "db")
    chunk = _rows(tmp_path / "db", "chunks")[0]
    cap = max(r.body["max_tokens"] for r in llm_env.requests if r.step == "propositions")

    assert chunk["prop_error"].startswith("extract: propositions: invalid answer after one repair: "
                                          f"answer cut off at its output cap (max_tokens={cap}")
    document = _rows(tmp_path / "db", "documents")[0]
    assert ("indexed", 0, 1) == (document["status"], document["proposition_count"], document["chunk_failures"])


def test_status_names_the_fallback(summary_cut_off_db, capsys):
    from propdex.cli import main

    assert 0 == main(["status", "--db", str(summary_cut_off_db), "--json"])
    row = json.loads(capsys.readouterr().out)[0]
    assert row["context_fallback"].startswith("summary: offline fallback")
    assert 0 == main(["status", "--db", str(summary_cut_off_db)])
    assert "[fallback: summary: offline fallback" in capsys.readouterr().out
