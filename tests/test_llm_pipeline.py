"""The whole ingest flow over the real openai client against the scripted server:
calls per chunk, token accounting, chunk-level reuse, faults and run-stopping errors."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import lancedb
import pytest

from propdex.cli import main
from propdex.llm.prompts import load_prompt
from tests.pdf_factory import make_pdf
from tests.scripted_fixtures import SENTINEL_KEY, scripted_run_environment
from tests.scripted_server import (
    ScriptedServer,
    malformed,
    prompt_tokens_of,
    server_error,
    unauthorized,
)

pytestmark = pytest.mark.prefect

PAGES = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by the company "
    "of the engineer Gustave Eiffel. The tower was built between 1887 and 1889 as the entrance "
    "arch of the 1889 World's Fair.\n\nThe tower is 330 metres tall. It was the tallest "
    "man-made structure in the world until the Chrysler Building was finished in 1930.",
    "The tower has three levels for visitors. Restaurants operate on the first and second "
    "levels. The top level's upper platform is 276 metres above the ground.\n\nTickets can be "
    "bought to ascend by stairs or by lift to the first and second levels.",
    "The Eiffel Tower is repainted every seven years to protect it from rust. About 60 tonnes "
    "of paint are used for each repainting.\n\nThe tower receives about seven million visitors "
    "every year.",
]


def _ingest(sources: list[Path], db: Path) -> dict:
    from flows.ingest import ingest

    return ingest(sources=[str(s) for s in sources], db=str(db))


def _rows(db: Path, table: str) -> list[dict]:
    return lancedb.connect(str(db)).open_table(table).to_arrow().to_pylist()


@dataclass
class Ingested:
    db: Path
    summary: dict
    server: ScriptedServer  # stopped; its record of requests stays readable


@pytest.fixture(scope="module")
def first_ingest(tmp_path_factory) -> Ingested:
    """One ingest of the Eiffel PDF into a new index on a server of its own (the tests reading
    it only read)."""
    root = tmp_path_factory.mktemp("first-ingest")
    with scripted_run_environment() as server:
        summary = _ingest([make_pdf(root / "eiffel.pdf", PAGES, title="The Eiffel Tower")], root / "db")
    return Ingested(root / "db", summary, server)


def test_at_most_two_calls_per_chunk(first_ingest):
    chunks = len(_rows(first_ingest.db, "chunks"))
    server = first_ingest.server

    assert chunks >= 3
    assert (chunks, chunks) == (server.calls("propositions"), server.calls("grading"))
    assert (1, 1) == (server.calls("title"), server.calls("summary"))


def test_prompt_tokens_are_summed_per_document(first_ingest):
    server = first_ingest.server
    sent = sum(prompt_tokens_of(r.body) for r in server.requests if r.path.endswith("/chat/completions"))
    document = _rows(first_ingest.db, "documents")[0]

    assert sent == document["prompt_tokens"]
    assert sent == first_ingest.summary["totals"]["prompt_tokens"]
    assert document["llm_calls"] == server.calls()


def test_editing_one_page_recalls_only_changed_chunks(llm_env, tmp_path):
    db = tmp_path / "db"
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    _ingest([pdf], db)
    before = {c["text"] for c in _rows(db, "chunks")}
    llm_env.reset()

    make_pdf(pdf, PAGES[:2] + ["The tower is repainted every seven years. Blue paint was never used."])
    summary = _ingest([pdf], db)
    changed = [c for c in _rows(db, "chunks") if c["text"] not in before]

    assert ["changed"] == [d["reason"] for d in summary["documents"]]
    assert 0 < len(changed) < len(before)
    assert (len(changed), len(changed)) == (llm_env.calls("propositions"), llm_env.calls("grading"))


def test_changing_the_grading_model_regrades_without_new_propositions(llm_env, tmp_path, monkeypatch):
    db = tmp_path / "db"
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    _ingest([pdf], db)
    chunks = len(_rows(db, "chunks"))
    llm_env.reset()

    monkeypatch.setenv("PROPDEX_LLM_MODEL_GRADING", "another-grader")
    summary = _ingest([pdf], db)

    assert ["settings changed"] == [d["reason"] for d in summary["documents"]]
    assert (0, chunks, 0) == (llm_env.calls("propositions"), llm_env.calls("grading"), llm_env.calls("title"))
    assert {"another-grader"} == {r.body["model"] for r in llm_env.requests if r.step == "grading"}


def test_output_invalid_after_repair_fails_only_that_chunk(llm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("PROPDEX_LLM_CONCURRENCY", "1")  # the first chunk gets both bad answers
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    llm_env.script(malformed(), malformed(), step="propositions")
    _ingest([pdf], tmp_path / "db")
    chunks = _rows(tmp_path / "db", "chunks")
    document = _rows(tmp_path / "db", "documents")[0]

    failed = [c for c in chunks if c["prop_error"]]
    assert 1 == len(failed)
    assert ("indexed", 1) == (document["status"], document["chunk_failures"])
    assert not [p for p in _rows(tmp_path / "db", "propositions") if p["chunk_id"] == failed[0]["chunk_id"]]


def test_rerun_retries_only_the_failed_chunk(llm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("PROPDEX_LLM_CONCURRENCY", "1")
    db = tmp_path / "db"
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    llm_env.script(malformed(), malformed(), step="propositions")
    _ingest([pdf], db)
    llm_env.reset()

    _ingest([pdf], db)

    assert (1, 1) == (llm_env.calls("propositions"), llm_env.calls("grading"))
    assert 0 == _rows(db, "documents")[0]["chunk_failures"]


def test_bad_key_stops_the_run_after_one_request(llm_env, tmp_path, capsys):
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    llm_env.script(*[unauthorized()] * 5)

    code = main(["ingest", str(pdf), "--db", str(tmp_path / "db")])
    err = capsys.readouterr().err

    assert 3 == code
    assert 1 == llm_env.calls()
    assert "401" in err and SENTINEL_KEY not in err


def test_a_stopped_run_logs_no_error_for_each_stage_after_the_failed_one(llm_env, tmp_path):
    # In a fresh process, whose stderr carries Prefect's log lines: the failed stage is
    # logged with its reason; the stages that never ran add nothing a user can act on.
    import os
    import subprocess
    import sys

    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    llm_env.script(*[unauthorized()] * 5)
    done = subprocess.run(
        [sys.executable, "-m", "propdex.cli", "ingest", str(pdf), "--db", str(tmp_path / "db")],
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])),
        capture_output=True, text=True, timeout=300)

    assert (3, True, False) == (done.returncode, "Finished in state Failed(" in done.stderr,
                                "NotReady" in done.stderr)


def test_server_failing_keeps_the_previous_version_searchable(llm_env, tmp_path):
    db = tmp_path / "db"
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    _ingest([pdf], db)
    live_before = {c["chunk_id"] for c in _rows(db, "chunks")}
    make_pdf(pdf, PAGES[:2] + ["The tower was painted red in 1889."])
    llm_env.script(*[server_error(500)] * 200)

    summary = _ingest([pdf], db)
    document = _rows(db, "documents")[0]

    assert ("failed", "llm") == (document["status"], document["error_kind"])
    assert "failed" == summary["documents"][0]["status"]
    assert live_before == {c["chunk_id"] for c in _rows(db, "chunks") if c["run_id"] == document["run_id"]}


@pytest.fixture
def add_prompt_version():
    """Installs a newer version of a step's prompt file, as a developer editing a prompt
    would, and removes it afterwards."""
    folder = Path(str(resources.files("propdex.llm") / "prompts"))
    added: list[Path] = []

    def add(step: str, edit) -> str:
        newest = max(int(p.name.split(".v")[1].removesuffix(".md")) for p in folder.glob(f"{step}.v*.md"))
        path = folder / f"{step}.v{newest + 1}.md"
        path.write_text(edit((folder / f"{step}.v{newest}.md").read_text(encoding="utf-8")), encoding="utf-8")
        added.append(path)
        load_prompt.cache_clear()
        return load_prompt(step).version

    yield add
    for path in added:
        path.unlink()
    load_prompt.cache_clear()


def test_a_new_propositions_prompt_redoes_propositions_and_nothing_else(
    llm_env, tmp_path, monkeypatch, add_prompt_version
):
    db = tmp_path / "db"
    pdf = make_pdf(tmp_path / "eiffel.pdf", PAGES)
    _ingest([pdf], db)
    chunks = len(_rows(db, "chunks"))
    llm_env.reset()

    version = add_prompt_version("propositions", lambda text: text.replace("Split the content", "Break the content"))
    # The process keeps one backend per settings; a setting that does not change outputs
    # gives a fresh one, which reads the new prompt file as a new process would.
    monkeypatch.setenv("PROPDEX_LLM_TIMEOUT", "6")
    summary = _ingest([pdf], db)

    assert ["settings changed"] == [d["reason"] for d in summary["documents"]]
    # The scripted model answers the new prompt with the same propositions, so their grading
    # (keyed by the grading prompt, model, chunk and propositions) comes from the cache.
    assert (chunks, 0, 0, 0) == tuple(llm_env.calls(step) for step in ("propositions", "grading", "title", "summary"))
    assert {version} == {p["prompt_version"] for p in _rows(db, "propositions")
                         if p["run_id"] == _rows(db, "documents")[0]["run_id"]}
