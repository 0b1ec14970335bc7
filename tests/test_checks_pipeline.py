"""The checks in an ingest against the scripted server: a model that answers placeholders,
empty strings, off-topic sentences and echoes of the prompt. Each answer is rejected with
its reason, and the document is still indexed with its chunks searchable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lancedb
import pytest

from propdex.api import IndexReader
from propdex.cli import main
from propdex.llm.offline_rules.titles import make_title
from propdex.settings import Settings
from tests.pdf_factory import make_pdf
from tests.scripted_fixtures import scripted_environment
from tests.scripted_server import ScriptedServer, default_answer
from tests.test_llm_pipeline import PAGES

pytestmark = pytest.mark.prefect

OFF_TOPIC = "The stock market rose sharply on Tuesday after the central bank cut interest rates."
ECHO = "Split compound sentences and keep the original wording of the content."
PLACEHOLDER = "..."
JUNK = {PLACEHOLDER: "empty", OFF_TOPIC: "ungrounded", ECHO: "ungrounded"}


def junk_answers(step: str | None, body: dict[str, Any]) -> str | None:
    """A weak model: every title "...", an off-topic summary, and propositions padded with
    a placeholder, an empty string, an off-topic sentence, an echo and a repeat."""
    if step == "title":
        return json.dumps({"title": PLACEHOLDER})
    if step == "summary":
        return json.dumps({"summary": OFF_TOPIC})
    if step == "propositions":
        found = json.loads(default_answer(step, body))["propositions"]
        # An exact repeat is dropped when the answer is read; one differing in case is not.
        repeat = found[0].upper()
        return json.dumps({"propositions": found + ["", PLACEHOLDER, OFF_TOPIC, ECHO, repeat]})
    return None  # grading: 8 on every criterion, junk included


@pytest.fixture(scope="module")
def junk_run(tmp_path_factory) -> Iterator[dict]:
    from flows.ingest import ingest

    folder = tmp_path_factory.mktemp("junk")
    with ScriptedServer(responder=junk_answers) as server, pytest.MonkeyPatch.context() as patch:
        for name, value in scripted_environment(server).items():
            patch.setenv(name, value)
        pdf = make_pdf(folder / "eiffel.pdf", PAGES)
        summary = ingest(sources=[str(pdf)], db=str(folder / "db"))
        yield {"db": folder / "db", "summary": summary, "server": server}


def _live(db: Path, table: str) -> list[dict]:
    connection = lancedb.connect(str(db))
    documents = connection.open_table("documents").to_arrow().to_pylist()
    if table == "documents":
        return documents
    live = {d["doc_id"]: d["run_id"] for d in documents}
    rows = connection.open_table(table).to_arrow().to_pylist()
    return [r for r in rows if live.get(r["doc_id"]) == r["run_id"]]


def test_a_title_without_letters_falls_back_naming_the_checks_reason(junk_run):
    fallback = _live(junk_run["db"], "documents")[0]["context_fallback"]
    assert ("title: offline fallback (title: invalid answer after one repair: title: rejected "
            "by the checks: no letters") in fallback


def test_the_fallback_title_is_the_offline_backends(junk_run):
    document = _live(junk_run["db"], "documents")[0]
    assert make_title(document["text"], None) == document["title"]


def test_an_off_topic_summary_falls_back_naming_the_checks_reason(junk_run):
    fallback = _live(junk_run["db"], "documents")[0]["context_fallback"]
    assert "summary: rejected by the checks: off-topic" in fallback


def test_junk_propositions_are_stored_rejected_with_their_reasons(junk_run):
    rows = [p for p in _live(junk_run["db"], "propositions") if p["text"] in JUNK]
    assert rows
    assert [(False, JUNK[p["text"]]) for p in rows] == [(p["passed"], p["reject_reason"]) for p in rows]


def test_a_repeated_proposition_is_rejected_as_a_duplicate(junk_run):
    by_chunk: dict[str, list[dict]] = {}
    for p in sorted(_live(junk_run["db"], "propositions"), key=lambda p: p["ordinal"]):
        by_chunk.setdefault(p["chunk_id"], []).append(p)
    repeats = [next(p for p in ps if p["text"] == ps[0]["text"].upper()) for ps in by_chunk.values()]
    assert [(False, "duplicate")] * len(by_chunk) == [(p["passed"], p["reject_reason"]) for p in repeats]


def test_the_sources_own_sentences_pass_with_no_reason(junk_run):
    kept = [p for p in _live(junk_run["db"], "propositions") if p["passed"]]
    assert kept
    assert {None} == {p["reject_reason"] for p in kept}


def test_the_document_is_indexed_with_its_chunks_searchable(junk_run):
    settings = Settings(db=str(junk_run["db"]), embedder="openai", embed_model="scripted-embed",
                        embed_base_url=junk_run["server"].url + "/v1", embed_api_key="sk-test")
    results = IndexReader(settings).search("How tall is the Eiffel Tower?", level="chunks", k=3)
    assert "indexed" == _live(junk_run["db"], "documents")[0]["status"]
    assert 3 == len(results)


def test_the_chunk_endpoints_reader_gives_each_propositions_reject_reason(junk_run):
    settings = Settings(db=str(junk_run["db"]), embedder="openai", embed_model="scripted-embed")
    chunk_id = _live(junk_run["db"], "chunks")[0]["chunk_id"]
    propositions = IndexReader(settings).chunk(chunk_id)["propositions"]
    assert "empty" == next(p["reject_reason"] for p in propositions if p["text"] == PLACEHOLDER)


def test_the_run_counts_the_rejections_per_step_and_reason(junk_run):
    propositions = _live(junk_run["db"], "propositions")
    chunks = len(_live(junk_run["db"], "chunks"))
    expected = {"propositions: duplicate": chunks, "propositions: empty": chunks,
                "propositions: ungrounded": 2 * chunks, "summary: off-topic": 1,
                "title: no letters": 1}
    assert expected == junk_run["summary"]["checks_rejected_totals"]
    assert len(propositions) == junk_run["summary"]["grader_totals"]["scripted-model"]["graded"]


def test_the_grader_passing_every_rejected_proposition_is_counted(junk_run):
    grader = junk_run["summary"]["grader_totals"]["scripted-model"]
    assert (4 * len(_live(junk_run["db"], "chunks")),) * 2 == (grader["rejected_by_checks"],
                                                              grader["passed_rejected"])


def test_status_says_what_the_checks_rejected(junk_run, capsys):
    main(["status", "--db", str(junk_run["db"])])
    chunks = len(_live(junk_run["db"], "chunks"))
    assert (f"[rejected by the checks: propositions: duplicate {chunks}, propositions: empty "
            f"{chunks}, propositions: ungrounded {2 * chunks}, summary: off-topic 1, title: no "
            "letters 1]") in capsys.readouterr().out
