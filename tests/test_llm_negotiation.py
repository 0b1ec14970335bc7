"""Structured-output negotiation: the first request finds the form a server accepts, once."""

from __future__ import annotations

import logging

import pytest

from propdex.errors import LLMError
from propdex.llm.client import negotiation_of
from propdex.llm.openai_backend import OpenAIBackend
from propdex.llm.structured import negotiated_notes
from tests.scripted_fixtures import scripted_settings
from tests.scripted_server import ScriptedServer, server_error

CHUNK = "The tower is 330 metres tall. It was built between 1887 and 1889."


def form_of(body: dict) -> str:
    response_format = body.get("response_format")
    if response_format is None:
        return "prompted"
    if response_format["type"] == "json_schema":
        schema = response_format["json_schema"]["schema"]
        return "json_schema+bounds" if "maxItems" in str(schema) or "maxLength" in str(schema) else "json_schema"
    return "json_object+schema" if "schema" in response_format else "json_object"


def run_steps(server: ScriptedServer, **overrides) -> list[str]:
    backend = OpenAIBackend(scripted_settings(server, **overrides))
    try:
        backend.propositions(CHUNK, title="Tower", section=None)
        backend.propositions(CHUNK + " It is in Paris.", title="Tower", section=None)
    finally:
        backend.close()
    return [form_of(r.body) for r in server.requests]


@pytest.mark.parametrize(("refused", "expected"), [
    ((), ["json_schema+bounds", "json_schema+bounds"]),
    (("json_schema",), ["json_schema+bounds", "json_schema", "json_object+schema", "json_object+schema"]),
    (("json_schema", "json_object"), ["json_schema+bounds", "json_schema", "json_object+schema",
                                      "json_object", "prompted", "prompted"]),
])
def test_forms_are_tried_once_then_the_accepted_one_is_kept(refused, expected):
    with ScriptedServer(refused_formats=refused) as server:
        assert expected == run_steps(server)


def test_a_fallback_form_gets_the_answer_format_in_the_prompt():
    with ScriptedServer(refused_formats=("json_schema",)) as server:
        run_steps(server)
        system = server.requests[-1].body["messages"][0]["content"]
    assert 'Reply with JSON only: {"propositions": ["..."]}' in system


def test_the_fallback_is_logged_once(caplog):
    caplog.set_level(logging.WARNING, logger="propdex.llm")
    with ScriptedServer(refused_formats=("json_schema",)) as server:
        run_steps(server)
    said = [r.getMessage() for r in caplog.records if "structured output" in r.getMessage()]
    assert 1 == len(said)
    assert "refused json_schema+bounds, json_schema; using json_object+schema" in said[0]


def test_the_run_report_note_names_the_form_and_the_refusals():
    with ScriptedServer(refused_formats=("json_schema",)) as server:
        run_steps(server)
        notes = negotiated_notes(server.url + "/v1")
    assert 1 == len(notes)
    assert notes[0].startswith("scripted-model: json_object+schema (refused: json_schema+bounds: HTTP 500")


def test_json_schema_off_sends_prompted_json_only():
    with ScriptedServer() as server:
        assert ["prompted", "prompted"] == run_steps(server, llm_json_schema=False)


def test_a_refused_cap_field_is_sent_as_the_other_one():
    with ScriptedServer(refused_fields=("max_tokens",)) as server:
        run_steps(server)
        fields = [("max_tokens" in r.body, "max_completion_tokens" in r.body) for r in server.requests]
    assert [(True, False), (False, True), (False, True)] == fields


def test_a_bare_server_error_on_the_first_request_is_retried_not_taken_as_a_refusal():
    with ScriptedServer() as server:
        server.script(server_error())
        forms = run_steps(server)
        negotiation = negotiation_of(scripted_settings(server), server.url + "/v1", "scripted-model")
    assert (["json_schema+bounds"] * 3, "json_schema+bounds") == (forms, negotiation.mode)


def test_a_failed_first_request_leaves_the_form_to_the_next_one():
    with ScriptedServer() as server:
        server.script(server_error(), server_error(), server_error())
        backend = OpenAIBackend(scripted_settings(server))
        try:
            with pytest.raises(LLMError):
                backend.title(CHUNK, truncated=False, hint=None)
            unsettled = negotiation_of(backend.settings, server.url + "/v1", "scripted-model").mode
            backend.title(CHUNK, truncated=False, hint=None)
        finally:
            backend.close()
        settled = negotiation_of(backend.settings, server.url + "/v1", "scripted-model").mode
    assert (None, "json_schema+bounds") == (unsettled, settled)


@pytest.mark.parametrize(("step", "expected"), [("title", 300), ("summary", None)])
def test_string_bounds_too_long_for_a_grammar_are_left_out(step, expected):
    with ScriptedServer(refused_formats=("json_schema",)) as server:
        backend = OpenAIBackend(scripted_settings(server))
        try:
            backend.title(CHUNK, truncated=False, hint=None)
            backend.summary(CHUNK, title="Tower", truncated=False)
        finally:
            backend.close()
        sent = next(r.body["response_format"] for r in server.requests
                    if r.step == step and r.status == 200)
    assert expected == sent["schema"]["properties"][step].get("maxLength")


def test_a_server_refusing_the_settled_form_is_negotiated_again():
    with ScriptedServer() as first:
        run_steps(first)  # settles json_schema+bounds for this URL
        url = first.url
    port = int(url.rsplit(":", 1)[1])
    with ScriptedServer(refused_formats=("json_schema",), port=port) as second:
        assert ["json_schema+bounds", "json_schema", "json_object+schema",
                "json_object+schema"] == run_steps(second)
