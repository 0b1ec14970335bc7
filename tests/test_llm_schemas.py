"""Answer models, their bounds, the strict JSON schemas and tolerant JSON parsing."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from propdex.llm.client import parse_json_answer, retry_after_seconds, scrub
from propdex.llm.schemas import (
    GradesAnswer,
    PropositionsAnswer,
    SummaryAnswer,
    TitleAnswer,
    strict_json_schema,
)


def grade(index: int, score: int = 8) -> dict:
    return {"index": index, "accuracy": score, "clarity": score, "completeness": score,
            "conciseness": score}


def objects_in(schema: dict) -> list[dict]:
    found = [schema] if schema.get("type") == "object" else []
    for value in schema.get("properties", {}).values():
        found += objects_in(value)
    if isinstance(schema.get("items"), dict):
        found += objects_in(schema["items"])
    return found


@pytest.mark.parametrize("model", [TitleAnswer, SummaryAnswer, PropositionsAnswer, GradesAnswer])
def test_strict_schemas_close_every_object_and_require_every_property(model):
    objects = objects_in(strict_json_schema(model))
    assert [(False, list(o["properties"])) for o in objects] == [
        (o["additionalProperties"], o["required"]) for o in objects
    ]


def test_nested_models_are_written_out_in_place():
    item = strict_json_schema(GradesAnswer)["properties"]["grades"]["items"]
    assert ["index", "accuracy", "clarity", "completeness", "conciseness"] == item["required"]


def test_strict_schemas_have_no_references():
    assert "$ref" not in json.dumps(strict_json_schema(GradesAnswer))


def test_the_title_schema_keeps_its_title_property():
    assert ["title"] == list(strict_json_schema(TitleAnswer)["properties"])


def test_strict_schemas_carry_no_docstrings():
    assert "description" not in strict_json_schema(GradesAnswer)


def test_propositions_are_stripped_deduplicated_and_bounded():
    answer = PropositionsAnswer.model_validate(
        {"propositions": ["  A fact.\n", "", "A fact.", "B " * 40, "C fact.", "D fact."]},
        context={"max_chars": 50, "max_propositions": 2},
    )
    assert ["A fact.", "C fact."] == answer.propositions


def test_propositions_without_context_are_only_cleaned():
    answer = PropositionsAnswer.model_validate({"propositions": [" a ", "b"]})
    assert ["a", "b"] == answer.propositions


def test_grades_covering_every_index_are_valid():
    answer = GradesAnswer.model_validate({"grades": [grade(1), grade(0)]}, context={"count": 2})
    assert [0, 1] == [g.index for g in answer.in_order()]


@pytest.mark.parametrize(
    ("indices", "message"),
    [([0], "missing indices [1]"), ([0, 1, 1], "more than once [1]"), ([0, 1, 2], "out of range [2]")],
)
def test_grades_must_cover_every_index_exactly_once(indices, message):
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        GradesAnswer.model_validate({"grades": [grade(i) for i in indices]}, context={"count": 2})


@pytest.mark.parametrize("score", [0, 11])
def test_a_score_out_of_1_to_10_is_kept_for_the_pipeline_to_count(score):
    answer = GradesAnswer.model_validate({"grades": [grade(0, score)]}, context={"count": 1})
    assert score == answer.grades[0].accuracy


def test_the_bounded_schema_asks_for_scores_from_1_to_10():
    schema = strict_json_schema(GradesAnswer, {"count": 2}, bounds=True)
    accuracy = schema["properties"]["grades"]["items"]["properties"]["accuracy"]
    assert (1, 10) == (accuracy["minimum"], accuracy["maximum"])


def test_a_title_is_one_line_without_quotes():
    assert "Levels of AGI" == TitleAnswer.model_validate({"title": ' "Levels of\n AGI" '}).title


def test_an_empty_summary_is_invalid():
    with pytest.raises(ValidationError):
        SummaryAnswer.model_validate({"summary": "  "})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here it is:\n```\n{"a": [1, 2]}\n```\nAnything else?', {"a": [1, 2]}),
        ('The answer is {"a": 1}.', {"a": 1}),
        ('{"a": [1, 2,], }', {"a": [1, 2]}),
        ('["x", "y"]', ["x", "y"]),
    ],
)
def test_json_answers_are_parsed_tolerantly(text, expected):
    assert expected == parse_json_answer(text)


@pytest.mark.parametrize("text", ['{"a": [1, 2', "no json here", '{"a": 1,, "b": 2}'])
def test_broken_json_is_refused(text):
    with pytest.raises(ValueError):
        parse_json_answer(text)


def failure_with_headers(headers: dict[str, str]) -> SimpleNamespace:
    return SimpleNamespace(response=SimpleNamespace(headers=headers))


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_headers_are_read(headers, seconds):
    assert seconds == retry_after_seconds(failure_with_headers(headers))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-SECRET-abcdef123 refused", "key *** refused"),
        ("Incorrect API key provided: sk-abc***********xyz.", "Incorrect API key provided: sk-***."),
    ],
)
def test_scrub_masks_the_key_and_key_like_strings(text, expected):
    assert expected == scrub(text, "sk-SECRET-abcdef123")
