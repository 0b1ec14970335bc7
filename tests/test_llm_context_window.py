"""Output caps within the model's context window, against a scripted server that validates
prompt + cap against its window as vLLM does: the window set or read from the server bounds
every cap; too little room, or the server's own context-length refusal, fails only the
request's chunk with the reason."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lancedb
import pytest

from propdex.cache import ResultCache
from propdex.models import Chunk, ChunkPropositions, DocumentContext, ExtractedDocument
from propdex.pipeline.context import document_context
from propdex.pipeline.propositions import propositions_for_document
from tests.scripted_fixtures import scripted_environment, scripted_settings
from tests.scripted_server import Action, ScriptedServer, reply
from tests.test_llm_tables import row_statements, table_part

VLLM_WINDOW = {"max_model_len": 4096}
# vLLM 0.10's wording, which names the cap's field as a refused request form would.
VLLM_OVERFLOW = ("'max_tokens' or 'max_completion_tokens' is too large: 5203. This model's maximum "
                 "context length is 4096 tokens and your request has 900 input tokens "
                 "(5203 > 4096 - 900).")


def table_chunk(rows: int = 30) -> Chunk:
    text = table_part(rows)
    return Chunk(chunk_id="c", doc_id="d", ordinal=3, text=text, char_start=0, char_end=len(text),
                 page_start=1, page_end=1)


def extract(server: ScriptedServer, tmp_path: Path, **overrides: object) -> ChunkPropositions:
    """The table chunk's propositions through the pipeline, on ``server``."""
    from propdex.llm.openai_backend import OpenAIBackend

    backend = OpenAIBackend(scripted_settings(server, **overrides))
    try:
        with ThreadPoolExecutor(1) as pool:
            [outcome] = propositions_for_document(
                [table_chunk()], DocumentContext(title="Minerals", summary="S."), backend,
                ResultCache(tmp_path / "cache"), backend.settings, pool)
    finally:
        backend.close()
    return outcome


def scripted_rows(server: ScriptedServer) -> None:
    server.script(reply(json.dumps({"propositions": row_statements(30)})), step="propositions")


def test_a_table_chunk_gets_its_propositions_from_a_window_checking_server_with_the_window_set(tmp_path):
    with ScriptedServer(context_window=4096) as server:
        scripted_rows(server)
        outcome = extract(server, tmp_path, llm_context_window=4096)
    assert (row_statements(30), None) == ([p.text for p in outcome.propositions], outcome.error)


def test_the_window_is_learned_from_the_max_model_len_of_v1_models(tmp_path):
    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        scripted_rows(server)
        outcome = extract(server, tmp_path)
    assert (row_statements(30), None) == ([p.text for p in outcome.propositions], outcome.error)


def test_llama_cpp_s_running_n_ctx_is_preferred_to_the_context_it_was_trained_with(tmp_path):
    with ScriptedServer(context_window=4096, model_fields={"meta": {"n_ctx_train": 32768}},
                        props={"default_generation_settings": {"n_ctx": 4096}}) as server:
        scripted_rows(server)
        outcome = extract(server, tmp_path)
    assert (row_statements(30), None) == ([p.text for p in outcome.propositions], outcome.error)


def test_the_window_is_read_once_per_server(tmp_path):
    with ScriptedServer(model_fields=VLLM_WINDOW) as server:
        extract(server, tmp_path / "first")
        extract(server, tmp_path / "second")
    assert ["/v1/models"] == [r.path for r in server.reads]


def test_every_cap_sent_fits_the_window_beside_its_prompt(tmp_path):
    from tests.scripted_server import prompt_tokens_of

    with ScriptedServer(model_fields=VLLM_WINDOW) as server:
        extract(server, tmp_path)
    assert all(prompt_tokens_of(r.body) + r.body["max_tokens"] <= 4096 for r in server.requests)


def test_a_prompt_leaving_too_little_room_fails_its_chunk_naming_the_sizes_and_the_fix(tmp_path):
    with ScriptedServer() as server:
        outcome = extract(server, tmp_path, llm_context_window=600)
    assert outcome.error.startswith("extract of chunk 3: propositions request: its prompt takes about ")
    assert outcome.error.endswith("tokens of the model's 600-token context window, leaving 0 for the "
                                  "answer, fewer than the 256 it needs; use a model or server with a "
                                  "larger context window, or a smaller chunk_size or a lower "
                                  "max_table_propositions")


def test_a_prompt_leaving_too_little_room_is_never_sent(tmp_path):
    with ScriptedServer() as server:
        extract(server, tmp_path, llm_context_window=600)
    assert 0 == server.calls("propositions")


def test_a_servers_context_length_refusal_fails_the_chunk_with_its_message(tmp_path):
    with ScriptedServer(context_window=4096) as server:
        outcome = extract(server, tmp_path, llm_context_window=0)
    assert ("extract of chunk 3: propositions request refused for its length by the server: This "
            "model's maximum context length is 4096 tokens.") in outcome.error


def test_a_servers_context_length_refusal_is_not_retried(tmp_path):
    with ScriptedServer(context_window=4096) as server:
        extract(server, tmp_path, llm_context_window=0)
    assert 1 == server.calls("propositions")


def test_a_context_length_refusal_naming_max_tokens_is_not_taken_for_a_refused_request_form(tmp_path):
    with ScriptedServer() as server:
        server.script(Action(status=400, error={"message": VLLM_OVERFLOW, "type": "BadRequestError"}),
                      step="propositions")
        outcome = extract(server, tmp_path, llm_context_window=0)
    assert (1, True) == (server.calls("propositions"), VLLM_OVERFLOW in outcome.error)


@pytest.mark.prefect
def test_a_table_document_is_indexed_whole_by_a_vllm_like_server_with_a_4096_token_window(
        tmp_path, monkeypatch):
    from flows.ingest import ingest

    source = tmp_path / "minerals.md"
    source.write_text(table_part(30) + "\n", encoding="utf-8")
    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        for name, value in scripted_environment(server).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("PROPDEX_CHUNK_SIZE", "2000")
        ingest(sources=[str(source)], db=str(tmp_path / "db"))
    [document] = lancedb.connect(str(tmp_path / "db")).open_table("documents").to_arrow().to_pylist()
    assert ("indexed", None, 0) == (document["status"], document["error"], document["chunk_failures"])


def long_document() -> ExtractedDocument:
    text = " ".join(f"Sentence {n} says that the harbour moved {n} tonnes of grain." for n in range(800))
    return ExtractedDocument(source="/d/harbour.txt", doc_id="d", content_sha256="0", kind="text",
                             text=text, pages=[])


def context_of(server: ScriptedServer, tmp_path: Path, **overrides: object) -> DocumentContext:
    from propdex.llm.openai_backend import OpenAIBackend

    backend = OpenAIBackend(scripted_settings(server, **overrides))
    try:
        return document_context(long_document(), backend, ResultCache(tmp_path / "cache"), backend.settings)
    finally:
        backend.close()


def test_a_long_documents_title_and_summary_are_written_from_the_start_that_fits_the_window(tmp_path):
    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        context = context_of(server, tmp_path)
    assert (None, True, True) == (context.fallback, context.title_truncated, context.summary_truncated)


def test_a_known_window_shortens_the_title_and_summary_prefixes_an_unknown_one_leaves_whole(tmp_path):
    with ScriptedServer() as server:
        context_of(server, tmp_path)
        sent = [len(r.body["messages"][1]["content"]) for r in server.requests]
    with ScriptedServer(model_fields=VLLM_WINDOW) as server:
        context_of(server, tmp_path / "windowed")
        fitted = [len(r.body["messages"][1]["content"]) for r in server.requests]
    assert [True, True] == [a > b for a, b in zip(sent, fitted, strict=True)]
