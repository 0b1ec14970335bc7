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


# --- a server restarted with another window ------------------------------------------------

SHRUNK_WINDOW = {"max_model_len": 1024}


def shrink(server: ScriptedServer) -> None:
    """The server restarted with --max-model-len 1024 behind the same URL."""
    server.context_window, server.model_fields = 1024, SHRUNK_WINDOW


def extract_rows(server: ScriptedServer, tmp_path: Path, chunks: int = 1, **overrides: object
                 ) -> list[ChunkPropositions]:
    """Six-row table chunks' propositions (a prompt that fits 1024 tokens beside the least
    answer), ``chunks`` of them extracted three at a time."""
    from propdex.llm.openai_backend import OpenAIBackend

    backend = OpenAIBackend(scripted_settings(server, **overrides))
    text = table_part(6)
    batch = [Chunk(chunk_id=f"c{n}", doc_id="d", ordinal=n, text=text, char_start=0,
                   char_end=len(text), page_start=1, page_end=1) for n in range(chunks)]
    try:
        with ThreadPoolExecutor(3) as pool:
            return propositions_for_document(batch, DocumentContext(title="Minerals", summary="S."),
                                             backend, ResultCache(tmp_path / "cache"), backend.settings, pool)
    finally:
        backend.close()


def test_a_request_refused_by_a_server_restarted_with_a_smaller_window_is_sent_again_sized_to_it(tmp_path):
    from tests.scripted_server import prompt_tokens_of

    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        extract_rows(server, tmp_path / "before")
        shrink(server)
        [outcome] = extract_rows(server, tmp_path / "after")
    [*_, last] = [r for r in server.requests if r.step == "propositions"]
    assert (None, True) == (outcome.error, prompt_tokens_of(last.body) + last.body["max_tokens"] <= 1024)


def test_a_server_restarted_with_a_smaller_window_is_read_once_more(tmp_path):
    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        extract_rows(server, tmp_path / "before")
        shrink(server)
        extract_rows(server, tmp_path / "after")
    assert ["/v1/models", "/v1/models"] == [r.path for r in server.reads]


def test_requests_refused_at_once_by_a_restarted_server_read_it_once_and_all_succeed(tmp_path):
    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        extract_rows(server, tmp_path / "before")
        shrink(server)
        outcomes = extract_rows(server, tmp_path / "after", chunks=6)
    assert ([None] * 6, 2) == ([o.error for o in outcomes], len(server.reads))


def test_a_server_that_stated_no_window_when_read_is_read_again_when_it_refuses_a_request(tmp_path):
    # vLLM still loading its model when the process first asked: no window then.
    with ScriptedServer() as server:
        extract_rows(server, tmp_path / "before")
        shrink(server)
        [outcome] = extract_rows(server, tmp_path / "after")
    assert (None, 2) == (outcome.error, len(server.reads))


def refused_for_1024(outcome: ChunkPropositions) -> bool:
    return outcome.error.startswith("extract of chunk 0: propositions request refused for its length by "
                                    "the server: This model's maximum context length is 1024 tokens.")


def test_a_refusal_of_a_request_sized_to_the_window_set_is_not_retried_nor_the_server_read(tmp_path):
    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        extract_rows(server, tmp_path / "before", llm_context_window=4096)
        shrink(server)
        [outcome] = extract_rows(server, tmp_path / "after", llm_context_window=4096)
    assert (True, 2, []) == (refused_for_1024(outcome), server.calls("propositions"), server.reads)


def test_a_refusal_by_a_server_stating_the_same_window_again_fails_after_one_reading(tmp_path):
    overflow = Action(status=400, error={"message": VLLM_OVERFLOW, "type": "BadRequestError"})
    with ScriptedServer(model_fields=VLLM_WINDOW) as server:
        server.script(overflow, step="propositions")
        [outcome] = extract_rows(server, tmp_path)
    assert (True, 1, ["/v1/models", "/v1/models"]) == (
        outcome.error.endswith(f"by the server: {VLLM_OVERFLOW} (use a model or server with a larger "
                               "context window, or a smaller chunk_size or a lower max_table_propositions, "
                               "or set llm_context_window)"),
        server.calls("propositions"), [r.path for r in server.reads])


def test_the_llm_chunkers_copy_refused_by_a_restarted_server_is_sent_again_sized_to_its_window():
    from propdex.chunking.llm import MARKER, load_prompt
    from propdex.chunking.llm_requests import ChunkingRequests
    from tests.scripted_server import prompt_tokens_of

    piece = " ".join(f"Sentence {n} says that the harbour moved {n} tonnes of grain." for n in range(15))
    messages = load_prompt("llm_chunk").messages(marker=MARKER, target=800, document=piece)
    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        # A cap set above what a copy needs, so that the 4096-token window's cut of it is
        # too long for 1024.
        requests = ChunkingRequests(scripted_settings(server, llm_max_tokens={"llm_chunk": 4000}))
        try:
            requests.copy(messages, len(piece))
            shrink(server)
            requests.copy(messages, len(piece))
        finally:
            requests.close()
    [*_, last] = server.requests
    assert ([200, 400, 200], True) == ([r.status for r in server.requests],
                                       prompt_tokens_of(last.body) + last.body["max_tokens"] <= 1024)


@pytest.mark.prefect
def test_a_process_running_flows_indexes_documents_whole_after_its_server_restarts_with_a_smaller_window(
        tmp_path, monkeypatch):
    from flows.ingest import ingest

    sources = [tmp_path / "before.md", tmp_path / "after.md"]
    for rows, source in zip((6, 5), sources, strict=True):
        source.write_text(table_part(rows) + "\n", encoding="utf-8")
    with ScriptedServer(context_window=4096, model_fields=VLLM_WINDOW) as server:
        for name, value in scripted_environment(server).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("PROPDEX_CHUNK_SIZE", "2000")
        ingest(sources=[str(sources[0])], db=str(tmp_path / "db"))
        shrink(server)
        ingest(sources=[str(sources[1])], db=str(tmp_path / "db"))
    documents = lancedb.connect(str(tmp_path / "db")).open_table("documents").to_arrow().to_pylist()
    assert [("indexed", None, 0)] * 2 == [(d["status"], d["error"], d["chunk_failures"]) for d in documents]
