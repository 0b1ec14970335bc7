"""Clause splitting for the offline propositions (part of ``offline-propositions-v4``).

Coordinated independent clauses are split at ", and " / ", but " / ", while " /
", whereas " / "; " when both sides have at least 4 words and a verb, the right side has a
subject (a pronoun or a content word before its first verb, and it does not open with a
base-form verb or a subordinator such as "that"/"which"/"because"), the joint is outside
parentheses, and the left side does not end in a short comma-separated list item
("cards, toys, and books").
"""

from __future__ import annotations

import re

from propdex.llm.offline_rules.text import (
    BASE_VERBS,
    PRONOUNS,
    STOPWORDS,
    capitalise_first,
    verb_positions,
    words,
)

MIN_WORDS = 4
_JOINT = re.compile(r",\s+(?:and|but|while|whereas)\s+|;\s+")
RELATIVE_WORDS = frozenset("that which who whom whose where when".split())
_SUBORDINATORS = RELATIVE_WORDS | frozenset(
    "if because since although though whether as so unless until while whereas".split()
)


def is_clause(text: str, *, needs_subject: bool) -> bool:
    """At least 4 words and a verb; with ``needs_subject``, a pronoun or a content word
    before the first verb ("thus may have served" has none)."""
    tokens = words(text)
    if len(tokens) < MIN_WORDS:
        return False
    positions = verb_positions(tokens)
    if not positions:
        return False
    if not needs_subject:
        return True
    if tokens[0].lower() in _SUBORDINATORS:
        return False  # ", and that are usable ...": a dependent clause, not a sentence
    if tokens[0].lower() in BASE_VERBS:
        return False  # ", and reflect on how ...": the verb shares the left side's subject
    return any(
        low in PRONOUNS or (low not in STOPWORDS and not low.endswith("ly"))
        for low in (t.lower() for t in tokens[: positions[0]])
    )


def clause_joints(sentence: str) -> list[re.Match[str]]:
    """The joints where ``sentence`` can be split into independent clauses."""
    joints = []
    start = 0
    for match in _JOINT.finditer(sentence):
        before = sentence[: match.start()]
        if before.count("(") > before.count(")"):
            continue
        left = sentence[start : match.start()]
        last_item = left.rsplit(",", 1)[-1] if "," in left else left
        if "," in left and len(last_item.split()) <= 3:
            continue  # "cards, toys, and books": a list, not two clauses
        right = sentence[match.end() :]
        if is_clause(left, needs_subject=False) and is_clause(right, needs_subject=True):
            joints.append(match)
            start = match.end()
    return joints


def split_clauses(sentence: str) -> list[str]:
    parts = []
    start = 0
    for joint in clause_joints(sentence):
        parts.append(sentence[start : joint.start()])
        start = joint.end()
    parts.append(sentence[start:])
    return [capitalise_first(part.strip()) for part in parts if part.strip()]
