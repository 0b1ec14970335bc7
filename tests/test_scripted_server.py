"""The scripted OpenAI-compatible server itself, through the real openai client."""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import openai
import pytest

from tests.scripted_server import (
    DEFAULT_MODEL,
    ScriptedServer,
    delayed,
    hang,
    hashed_vector,
    reply,
    server_error,
)


@pytest.fixture
def client(scripted_server: ScriptedServer):
    made = openai.OpenAI(base_url=scripted_server.url + "/v1", api_key="k", max_retries=0)
    yield made
    made.close()


def chat(client: openai.OpenAI, system: str, user: str, schema_name: str | None = None) -> str:
    extra = {}
    if schema_name:
        extra["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": {"type": "object"}, "strict": True},
        }
    completion = client.chat.completions.create(
        model=DEFAULT_MODEL,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        **extra,
    )
    return completion.choices[0].message.content


def test_models_lists_the_served_model(client):
    assert [DEFAULT_MODEL] == [model.id for model in client.models.list()]


def test_the_step_is_read_from_the_json_schema_name(client, scripted_server):
    chat(client, "Grade these.", "<propositions>\n[0] A.\n</propositions>", schema_name="grading")
    assert "grading" == scripted_server.requests[0].step


@pytest.mark.parametrize(
    ("system", "step"),
    [
        ('Reply with JSON only: {"propositions": ["..."]}', "propositions"),
        ('Reply with JSON only: {"grades": [...]}', "grading"),
        ('Reply with JSON only: {"title": "..."}', "title"),
        ('Reply with JSON only: {"summary": "..."}', "summary"),
        ("Say hello.", None),
    ],
)
def test_the_step_is_read_from_the_prompt_without_a_schema(client, scripted_server, system, step):
    chat(client, system, "hello")
    assert step == scripted_server.requests[0].step


def test_default_propositions_are_the_sentences_of_the_content_block(client):
    user = "Title: T\n<content>\nPisa is in Italy. The tower leans.\n</content>"
    answer = chat(client, "x", user, schema_name="propositions")
    assert {"propositions": ["Pisa is in Italy.", "The tower leans."]} == json.loads(answer)


def test_default_grades_cover_every_numbered_proposition(client):
    user = "<source>\nS.\n</source>\n<propositions>\n[0] A.\n[1] B.\n</propositions>"
    grades = json.loads(chat(client, "x", user, schema_name="grading"))["grades"]
    assert [(0, 8, 8, 8, 8), (1, 8, 8, 8, 8)] == [
        (g["index"], g["accuracy"], g["clarity"], g["completeness"], g["conciseness"]) for g in grades
    ]


def test_default_title_is_the_first_line_of_the_document(client):
    user = "<document>\n\nLevels of AGI\nsecond line\n</document>"
    assert {"title": "Levels of AGI"} == json.loads(chat(client, "x", user, schema_name="title"))


def test_usage_estimates_prompt_tokens_as_characters_over_four(client):
    completion = client.chat.completions.create(
        model=DEFAULT_MODEL, messages=[{"role": "user", "content": "x" * 41}]
    )
    assert (11, math.ceil(len("OK") / 4)) == (
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
    )


def test_scripted_actions_are_used_in_order_then_the_default(client, scripted_server):
    scripted_server.script(reply("first"), reply("second"))
    answers = [chat(client, "Say hello.", "hi") for _ in range(3)]
    assert ["first", "second", "OK"] == answers


def test_a_step_script_is_used_only_by_that_step(client, scripted_server):
    scripted_server.script(server_error(), step="grading")
    title = chat(client, "x", "<document>\nA title\n</document>", schema_name="title")
    with pytest.raises(openai.InternalServerError):
        chat(client, "x", "<propositions>\n[0] A.\n</propositions>", schema_name="grading")
    assert {"title": "A title"} == json.loads(title)


def test_calls_count_posts_per_step(client, scripted_server):
    chat(client, "x", "y", schema_name="title")
    chat(client, "x", "y", schema_name="grading")
    chat(client, "x", "y", schema_name="grading")
    assert (3, 2, 1) == (
        scripted_server.calls(),
        scripted_server.calls("grading"),
        scripted_server.calls("title"),
    )


def test_every_request_is_recorded_with_its_body_and_headers(scripted_server):
    recorded_client = openai.OpenAI(
        base_url=scripted_server.url + "/v1", api_key="k", max_retries=0,
        default_headers={"X-Trace": "t-1"},
    )
    recorded_client.chat.completions.create(
        model=DEFAULT_MODEL, messages=[{"role": "user", "content": "hi"}]
    )
    recorded_client.close()
    request = scripted_server.requests[0]
    assert ("POST", "/v1/chat/completions", "hi", "t-1") == (
        request.method, request.path, request.body["messages"][0]["content"], request.headers["x-trace"],
    )


def test_a_responder_overrides_the_default_answer(client):
    with ScriptedServer(responder=lambda step, body: "custom" if step is None else None) as server:
        own = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
        answer = chat(own, "Say hello.", "hi")
        own.close()
    assert "custom" == answer


def test_an_unknown_path_is_404(scripted_server):
    request = urllib.request.Request(scripted_server.url + "/v1/nothing", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert 404 == caught.value.code


def test_the_highest_number_of_requests_in_flight_is_tracked(client, scripted_server):
    scripted_server.latency_ms = 200
    start = threading.Barrier(3)

    def call() -> None:
        start.wait()
        chat(client, "Say hello.", "hi")

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 3 == scripted_server.max_in_flight


def test_embeddings_are_deterministic_hash_vectors(client):
    response = client.embeddings.create(model="e", input=["alpha", "beta"], encoding_format="float")
    vectors = np.array([item.embedding for item in response.data], dtype=np.float32)
    assert np.array_equal(np.stack([hashed_vector("alpha", 384), hashed_vector("beta", 384)]), vectors)


def test_base64_embeddings_equal_float_embeddings(client):
    as_float = client.embeddings.create(model="e", input=["alpha"], encoding_format="float")
    as_base64 = client.embeddings.create(model="e", input=["alpha"])  # the client's default
    assert np.allclose(as_float.data[0].embedding, as_base64.data[0].embedding)


def test_the_embedding_size_is_configurable():
    with ScriptedServer(embed_dim=16) as server:
        own = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
        response = own.embeddings.create(model="e", input="alpha", encoding_format="float")
        own.close()
    assert 16 == len(response.data[0].embedding)


def test_stopping_leaves_no_threads_behind():
    before = set(threading.enumerate())
    server = ScriptedServer().start()
    own = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0, timeout=0.2)
    own.chat.completions.create(model=DEFAULT_MODEL, messages=[{"role": "user", "content": "hi"}])
    server.script(hang(30))
    with pytest.raises(openai.APITimeoutError):  # leaves a handler thread hanging
        own.chat.completions.create(model=DEFAULT_MODEL, messages=[{"role": "user", "content": "hi"}])
    server.stop()  # while the client still holds a keep-alive connection open
    left = set(threading.enumerate()) - before
    own.close()
    assert set() == left


def test_a_released_request_ends_unanswered_and_the_next_is_served(scripted_server, client):
    scripted_server.script(hang(600))
    outcome = []

    def ask() -> None:
        try:
            outcome.append(chat(client, "system", "held"))
        except openai.APIConnectionError:
            outcome.append("closed unanswered")

    held = threading.Thread(target=ask)
    held.start()
    while scripted_server.calls() < 1:
        threading.Event().wait(0.01)
    scripted_server.release()
    held.join(timeout=30)

    assert (["closed unanswered"], "OK") == (outcome, chat(client, "system", "next"))


def test_the_moment_a_client_hangs_up_on_a_held_request_is_recorded(scripted_server):
    scripted_server.script(delayed(100), hang(600))
    own = openai.OpenAI(base_url=scripted_server.url + "/v1", api_key="k", max_retries=0, timeout=0.5)
    hi = [{"role": "user", "content": "hi"}]
    own.chat.completions.create(model=DEFAULT_MODEL, messages=hi)  # waited for
    with pytest.raises(openai.APITimeoutError):  # the client gives up and closes the connection
        own.chat.completions.create(model=DEFAULT_MODEL, messages=hi)
    own.close()
    answered, held = scripted_server.requests
    deadline = time.monotonic() + 30
    while held.hung_up is None and time.monotonic() < deadline:
        time.sleep(0.01)

    assert (None, True) == (answered.hung_up, held.received + 0.4 <= (held.hung_up or 0))
