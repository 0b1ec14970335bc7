"""Properties of the parsers that read LLM answers (hypothesis): whatever a model sends,
they return bounded, well-formed values or a ValueError/ValidationError, never anything else."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from propdex.llm.client import parse_json_answer
from propdex.llm.schemas import GradesAnswer, PropositionsAnswer

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
OBJECTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)


@given(OBJECTS)
def test_plain_json_objects_parse_back(value):
    assert value == parse_json_answer(json.dumps(value))


@given(OBJECTS, st.sampled_from(["json", ""]))
def test_fenced_json_parses_back(value, language):
    assert value == parse_json_answer(f"```{language}\n{json.dumps(value)}\n```")


@given(st.text(max_size=300))
@settings(max_examples=300)
def test_any_text_parses_to_json_or_raises_value_error(text):
    try:
        outcome = type(parse_json_answer(text))
    except ValueError:
        outcome = ValueError
    assert outcome in {dict, list, str, int, float, bool, type(None), ValueError}


@given(st.lists(st.text(max_size=80), max_size=40), st.integers(1, 10), st.integers(1, 60))
def test_propositions_are_bounded_in_count_and_length(items, max_count, max_chars):
    answer = PropositionsAnswer.model_validate(
        {"propositions": items}, context={"max_propositions": max_count, "max_chars": max_chars})
    kept = answer.propositions
    assert (True, True, True, True) == (
        len(kept) <= max_count,
        all(0 < len(p) <= max_chars for p in kept),
        len(set(kept)) == len(kept),
        all(p == " ".join(p.split()) for p in kept),
    )


@given(st.lists(st.text(max_size=30), max_size=20))
def test_kept_propositions_come_from_the_answer_in_order(items):
    kept = PropositionsAnswer.model_validate({"propositions": items}).propositions
    cleaned = [" ".join(item.split()) for item in items]
    positions = [cleaned.index(p) for p in kept]
    assert sorted(positions) == positions


def grades(indices: list[int], score: int = 8) -> dict:
    return {"grades": [{"index": i, "accuracy": score, "clarity": score, "completeness": score,
                        "conciseness": score} for i in indices]}


@given(st.integers(1, 15).flatmap(lambda n: st.tuples(st.just(n), st.permutations(range(n)))))
def test_grades_of_every_index_once_are_valid_in_order(case):
    count, order = case
    answer = GradesAnswer.model_validate(grades(list(order)), context={"count": count})
    assert list(range(count)) == [g.index for g in answer.in_order()]


@given(st.integers(1, 10), st.lists(st.integers(-3, 12), max_size=14))
def test_grades_are_valid_only_when_every_index_appears_once(count, indices):
    valid = sorted(indices) == list(range(count))
    try:
        GradesAnswer.model_validate(grades(indices), context={"count": count})
        accepted = True
    except ValidationError:
        accepted = False
    assert valid == accepted


@given(st.integers(-5, 20))
def test_every_integer_score_is_read_as_given(score):
    # The range is judged by propdex.pipeline.grading (counted against the grader), not here.
    answer = GradesAnswer.model_validate(grades([0], score), context={"count": 1})
    assert score == answer.grades[0].accuracy


@pytest.mark.parametrize("garbage", ["", "{", "[1, 2,", "nothing here", "{'single': 'quotes'}"])
def test_known_garbage_raises_value_error(garbage):
    with pytest.raises(ValueError):
        parse_json_answer(garbage)
