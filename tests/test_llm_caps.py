"""Per-step output caps: derived from what each step may return, overridable, reported when hit."""

from __future__ import annotations

import json

import pytest

from propdex.errors import LLMAnswerCutOffError
from propdex.llm.output_caps import (
    CHARS_PER_TOKEN_FLOOR,
    ELEMENT_TOKENS,
    SLACK_TOKENS,
    UnboundedAnswerError,
    copy_cap,
    derived_json_cap,
    longest_json,
    output_cap,
)
from propdex.llm.schemas import GradesAnswer, PropositionsAnswer, SummaryAnswer, TitleAnswer
from propdex.models import Scores
from propdex.settings import Settings
from tests.scripted_server import ScriptedServer, reply, truncated

CHUNK = "The tower is 330 metres tall. It was built between 1887 and 1889. It is repainted every seven years."
SENTENCES = ["The tower is 330 metres tall.", "It was built between 1887 and 1889."]


@pytest.fixture
def backend(make_openai_backend):
    return make_openai_backend


def sent_caps(server: ScriptedServer, step: str) -> list[int | None]:
    return [r.body.get("max_tokens") for r in server.requests if r.step == step]


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "string", "maxLength": 10}, 12),
    ({"type": "integer", "minimum": 1, "maximum": 10}, 2),
    ({"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 4}}, 2 + 3 * 8),
    ({"type": "object", "properties": {"ab": {"type": "boolean"}}}, 2 + 2 + 6 + 5),
])
def test_longest_json_follows_the_schema_bounds(schema, expected):
    assert expected == longest_json(schema)


def test_an_unbounded_list_has_no_longest_json():
    with pytest.raises(UnboundedAnswerError):
        longest_json({"type": "array", "items": {"type": "string", "maxLength": 3}})


def test_the_propositions_cap_grows_with_max_propositions_times_max_chars():
    small = derived_json_cap(PropositionsAnswer, {"max_propositions": 5, "max_chars": 100})
    large = derived_json_cap(PropositionsAnswer, {"max_propositions": 10, "max_chars": 100})
    # Five more items of 100 characters (+ quotes and separator) in tokens of 3 characters,
    # each with room for its line break, indentation and split punctuation.
    assert 5 * ((100 + 2 + 2) / CHARS_PER_TOKEN_FLOOR + ELEMENT_TOKENS) == pytest.approx(large - small, abs=1)


def test_the_grading_cap_counts_the_propositions_sent():
    assert derived_json_cap(GradesAnswer, {"count": 2}) < derived_json_cap(GradesAnswer, {"count": 20})


@pytest.mark.parametrize("model", [TitleAnswer, SummaryAnswer])
def test_a_title_or_summary_of_the_longest_valid_length_fits_its_cap(model):
    field = next(iter(model.model_fields))
    longest = model.model_fields[field].metadata[-1].max_length
    answer = model(**{field: "x" * longest}).model_dump_json()
    assert len(answer) / CHARS_PER_TOKEN_FLOOR <= derived_json_cap(model, None) - SLACK_TOKENS


def test_a_copy_cap_covers_the_copied_characters():
    assert 4000 / CHARS_PER_TOKEN_FLOOR < copy_cap(4000)


@pytest.mark.parametrize(("overrides", "expected"), [
    ({}, 120),
    ({"llm_max_tokens": {"summary": 40}}, 40),
    ({"llm_max_tokens": {"summary": 0}}, None),
    ({"llm_output_caps": False}, None),
    ({"llm_output_caps": False, "llm_max_tokens": {"summary": 40}}, 40),
])
def test_the_cap_sent_is_the_override_else_the_derived_one(overrides, expected):
    assert expected == output_cap("summary", Settings(**overrides), 120)


def test_an_unknown_step_in_the_overrides_is_refused():
    with pytest.raises(ValueError, match="unknown steps \\['summry'\\]"):
        Settings(llm_max_tokens={"summry": 10})


@pytest.mark.parametrize("step", ["title", "summary", "propositions", "grading"])
def test_every_step_sends_its_derived_cap(backend, scripted_server, step):
    b = backend()
    expected = {
        "title": derived_json_cap(TitleAnswer, None),
        "summary": derived_json_cap(SummaryAnswer, None),
        "propositions": derived_json_cap(PropositionsAnswer, {"max_propositions": 25, "max_chars": 600}),
        "grading": derived_json_cap(GradesAnswer, {"count": 2}),
    }[step]
    call = {
        "title": lambda: b.title(CHUNK, truncated=False, hint=None),
        "summary": lambda: b.summary(CHUNK, title="Tower", truncated=False),
        "propositions": lambda: b.propositions(CHUNK, title="Tower", section=None),
        "grading": lambda: b.grade(CHUNK, SENTENCES, title="Tower", section=None),
    }[step]
    call()
    assert [expected] == sent_caps(scripted_server, step)


def test_an_override_replaces_the_derived_cap(backend, scripted_server):
    backend(llm_max_tokens={"propositions": 500}).propositions(CHUNK, title="Tower", section=None)
    assert [500] == sent_caps(scripted_server, "propositions")


def test_caps_off_send_no_cap(backend, scripted_server):
    backend(llm_output_caps=False).propositions(CHUNK, title="Tower", section=None)
    assert [None] == sent_caps(scripted_server, "propositions")


def test_an_answer_stopped_at_its_cap_is_reported_as_cut_off(backend, scripted_server):
    with pytest.raises(LLMAnswerCutOffError) as caught:
        backend(llm_max_tokens={"summary": 5}).summary(CHUNK, title="Tower", truncated=False)
    assert "summary: invalid answer after one repair: answer cut off at its output cap " \
           "(max_tokens=5, finish_reason=length)" == str(caught.value)


def test_the_repair_of_a_cut_off_answer_asks_for_a_shorter_one(backend, scripted_server):
    with pytest.raises(LLMAnswerCutOffError):
        backend(llm_max_tokens={"summary": 5}).summary(CHUNK, title="Tower", truncated=False)
    assert "Keep it shorter" in scripted_server.requests[-1].body["messages"][-1]["content"]


def test_the_cap_goes_in_max_completion_tokens_when_configured(backend, scripted_server):
    backend(llm_max_tokens_field="max_completion_tokens").title(CHUNK, truncated=False, hint=None)
    body = scripted_server.requests[0].body
    assert (derived_json_cap(TitleAnswer, None), False) == (body["max_completion_tokens"], "max_tokens" in body)


def test_a_pretty_printed_grading_of_25_propositions_fits_its_cap(backend, scripted_server):
    propositions = [f"The tower was repainted in {1900 + 7 * n}." for n in range(25)]
    keys = ("accuracy", "clarity", "completeness", "conciseness")
    pretty = json.dumps({"grades": [{"index": i, **dict.fromkeys(keys, 10)} for i in range(25)]}, indent=2)
    scripted_server.script(reply(pretty), step="grading")
    grades = backend().grade(CHUNK, propositions, title="Tower", section=None).value
    assert [Scores(10, 10, 10, 10)] * 25 == grades


def test_an_answer_stopped_short_of_its_cap_is_reported_as_cut_off_by_the_server(backend, scripted_server):
    scripted_server.script(truncated(), truncated(), step="summary")
    with pytest.raises(LLMAnswerCutOffError) as caught:
        backend().summary(CHUNK, title="Tower", truncated=False)
    cap = derived_json_cap(SummaryAnswer, None)
    assert (f"short of its output cap (max_tokens={cap}, finish_reason=length): is the context "
            "window full?") in str(caught.value)
