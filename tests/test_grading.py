"""The verdict on each proposition (propdex.pipeline.grading): the checks first, then the
grades, and the grader watched against the checks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from propdex.models import Chunk, Scores, Usage
from propdex.pipeline.grading import judged_propositions
from propdex.settings import Settings

CHUNK = Chunk(
    chunk_id="c1", doc_id="d1", ordinal=0, char_start=0, char_end=120, page_start=1, page_end=1,
    text="The Eiffel Tower is 330 metres tall. It was designed by the engineer Gustave Eiffel.",
    header="Document: The Eiffel Tower\nSummary: The Eiffel Tower in Paris.",
)
GROUNDED = "The Eiffel Tower is 330 metres tall."
OFF_TOPIC = "The stock market rose sharply after the central bank cut rates."
GOOD, POOR = Scores(9, 9, 9, 9), Scores(9, 2, 9, 9)


def judged(texts: list[str], scores: list[Scores] | None):
    return judged_propositions(CHUNK, texts, scores, "The Eiffel Tower", Usage(), Settings(llm="offline"))


def test_a_proposition_the_checks_reject_never_passes_whatever_its_grades():
    outcome = judged([GROUNDED, OFF_TOPIC], [GOOD, GOOD])
    assert [(True, None), (False, "ungrounded")] == [(p.passed, p.reject_reason) for p in outcome.propositions]


def test_a_grounded_proposition_graded_below_a_threshold_says_so():
    outcome = judged([GROUNDED], [POOR])
    assert [(False, "below threshold")] == [(p.passed, p.reject_reason) for p in outcome.propositions]


def test_a_grade_out_of_1_to_10_rejects_its_proposition():
    outcome = judged([GROUNDED], [Scores(11, 9, 9, 9)])
    assert [(False, "grade out of range")] == [(p.passed, p.reject_reason) for p in outcome.propositions]


@given(st.integers(-5, 20))
def test_a_grade_is_out_of_range_exactly_outside_1_to_10(score):
    reason = judged([GROUNDED], [Scores(score, 9, 9, 9)]).propositions[0].reject_reason
    assert (not 1 <= score <= 10) == (reason == "grade out of range")


def test_a_grade_too_large_to_store_is_kept_at_the_nearest_storable_value():
    outcome = judged([GROUNDED], [Scores(900, 9, 9, -500)])
    assert Scores(127, 9, 9, -128) == outcome.propositions[0].scores


def test_ungraded_propositions_are_not_passed_and_say_so():
    outcome = judged([GROUNDED], None)
    assert [(False, "ungraded")] == [(p.passed, p.reject_reason) for p in outcome.propositions]


def test_the_grader_is_counted_against_the_checks():
    watch = judged([GROUNDED, OFF_TOPIC, "...", GROUNDED], [GOOD, GOOD, POOR, Scores(0, 9, 9, 9)]).grader
    assert (4, 1, 3, 1) == (watch.graded, watch.out_of_range, watch.rejected_by_checks, watch.passed_rejected)
