"""The deterministic checks of LLM answers (propdex.checks), on their own."""

from __future__ import annotations

import json

import pytest

from propdex.checks.context import summary_problem, title_problem
from propdex.checks.propositions import proposition_problems
from propdex.llm.prompts import load_prompt

DOCUMENT = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by the company "
    "of the engineer Gustave Eiffel. The tower was built between 1887 and 1889 as the entrance "
    "arch of the 1889 World's Fair. The tower is 330 metres tall."
)
TITLE = "The Eiffel Tower"
TITLE_INSTRUCTIONS = load_prompt("title").system + "\n" + load_prompt("title").user
SUMMARY_INSTRUCTIONS = load_prompt("summary").system + "\n" + load_prompt("summary").user
CHUNK = (
    "It was designed by the company of the engineer Gustave Eiffel. It is 330 metres tall and "
    "was the tallest man-made structure in the world until 1930."
)
HEADER = "Document: The Eiffel Tower\nSummary: A description of the Eiffel Tower in Paris."

# Written for these tests in the manner of the Dense X gold propositions: decontextualised
# (pronouns resolved to the names the chunk or the title gives), close to the source wording.
GOLD_LIKE = [
    "The Eiffel Tower was designed by the company of the engineer Gustave Eiffel.",
    "Gustave Eiffel was an engineer.",
    "The Eiffel Tower is 330 metres tall.",
    "The Eiffel Tower was the tallest man-made structure in the world until 1930.",
]


def _problems(propositions: list[str]) -> list[str | None]:
    return proposition_problems(propositions, CHUNK, (HEADER, TITLE))


@pytest.mark.parametrize(("title", "reason"), [
    ("...", "no letters"), ("—", "no letters"), ("N/A", "placeholder"),
    ("Untitled", "placeholder"), ("[Document title]", "placeholder"),
    ("Title in the file's metadata", "echo of the prompt"),
    ("Give the document's own title", "echo of the prompt"),
])
def test_a_title_that_is_not_a_title_is_rejected_with_its_reason(title, reason):
    assert reason == title_problem(title, document=DOCUMENT, instructions=TITLE_INSTRUCTIONS)


@pytest.mark.parametrize("title", ["The Eiffel Tower", "Untitled Goose Game", "A History of Paris Landmarks"])
def test_a_real_title_passes(title):
    assert None is title_problem(title, document=DOCUMENT, instructions=TITLE_INSTRUCTIONS)


def test_words_of_the_prompt_that_the_document_also_says_are_no_echo():
    document = "Give the document's own title to every report you file."
    assert None is title_problem("Give the document's own title", document=document,
                                 instructions=TITLE_INSTRUCTIONS)


@pytest.mark.parametrize(("summary", "reason"), [
    ("...", "no letters"), ("", "no letters"), ("N/A", "placeholder"), ("Summary.", "placeholder"),
    ("A famous tower.", "not a sentence"),
    ("The stock market rose sharply on Tuesday after the central bank cut rates.", "off-topic"),
    ("This document describes a study of the work.", "off-topic"),
    ("Write exactly one sentence of at most 50 words.", "echo of the prompt"),
])
def test_a_summary_that_is_not_one_is_rejected_with_its_reason(summary, reason):
    assert reason == summary_problem(summary, document=DOCUMENT, title=TITLE,
                                     instructions=SUMMARY_INSTRUCTIONS)


def test_a_real_summary_passes():
    summary = "The document describes the Eiffel Tower in Paris, its designer and its height."
    assert None is summary_problem(summary, document=DOCUMENT, title=TITLE,
                                   instructions=SUMMARY_INSTRUCTIONS)


def test_gold_like_propositions_pass():
    assert [None] * len(GOLD_LIKE) == _problems(GOLD_LIKE)


def test_a_paraphrase_adding_the_titles_words_passes():
    assert [None] == _problems(["Standing in Paris, the Eiffel Tower measures 330 metres."])


@pytest.mark.parametrize(("proposition", "reason"), [
    ("", "empty"), ("...", "empty"), ("N/A", "empty"), ("Eiffel designed it.", "too short"),
    ("The stock market rose sharply on Tuesday after the rate cut.", "ungrounded"),
    ("Decompose the content into clear and simple propositions.", "ungrounded"),
])
def test_a_proposition_that_states_nothing_from_the_chunk_is_rejected(proposition, reason):
    assert [reason] == _problems([proposition])


def test_a_repeated_proposition_is_a_duplicate():
    repeated = "The Eiffel Tower is 330 metres tall."
    assert [None, "duplicate"] == _problems([repeated, "the eiffel tower is 330 metres TALL"])


def test_a_repeat_differing_in_stop_words_and_word_endings_is_a_duplicate():
    assert [None, "duplicate"] == _problems(["The Eiffel Tower is 330 metres tall.",
                                             "Eiffel Tower: 330 metre, tall!"])


def test_the_same_words_in_another_order_are_another_proposition():
    chunk = "On EN-DE the Transformer outperforms ByteNet, which ConvS2S in turn outperforms."
    assert [None, None] == proposition_problems(["The Transformer outperforms ByteNet on EN-DE.",
                                                 "ByteNet outperforms the Transformer on EN-DE."], chunk)


def test_every_gold_dense_x_proposition_passes(corpus):
    examples = json.loads((corpus / "dense-x" / "propositionizer_examples.json").read_text())["examples"]
    problems = [
        (p, proposition_problems([p], e["content"], (e["section"], e["title"]))[0])
        for e in examples for p in e["propositions"]
    ]
    assert [] == [(p, why) for p, why in problems if why is not None]


def test_the_offline_title_rules_share_the_placeholder_check():
    from propdex.llm.offline_rules.titles import plausible_hint

    assert (None, "Levels of AGI") == (plausible_hint("Lorem ipsum"), plausible_hint("Levels of AGI"))
