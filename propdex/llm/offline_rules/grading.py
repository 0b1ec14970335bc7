"""Offline grading rules (``offline-grading-v4``): four 1..10 scores per proposition.

- accuracy: the share of the proposition's content words found in the chunk text, its
  title or its section, scaled to 10 and rounded half up: the grounding measure of the
  checks (``propdex.checks.words``: Snowball stems, stop words out, numbers kept;
  "authors"/"paper"/"document" count as found, a hyphenated word is found when it or all
  of its parts are). 10 when all found.
- clarity: starts at 10. A leading pronoun (it/they/this/these/those/that/he/she/its/their/
  his/her, not an expletive "It is ... that/to") -4; a leading we/our/us -4; each inner
  he/she/it/they/them/its/their/his/her/him without an antecedent in the proposition
  (a capitalised name before it for he/she, two content words before it otherwise) -2;
  an inner we/our/us -2 (once); an inner this/these/those used as a pronoun -2, as a
  determiner -1; "the former"/"the latter" -3; broken characters (U+FFFD, "(cid:", control
  characters, a word split as "exam- ple") -3. Inner penalties are capped at -6.
- completeness: starts at 10. No verb -5; no closing punctuation -3, or ending on a
  function word -3; unmatched parentheses/brackets -3; unmatched quotes -2; fewer than 3
  words -6, fewer than 5 words -4; starting in lowercase (a sentence's tail) -4.
- conciseness: starts at 10 (the title counts as one word). Over 35 words -1 (over 50 -2,
  over 70 -3: the rules cannot shorten a source sentence, so length alone never rejects); each clause joint that the proposition rules would split ("; ", ", and",
  ", but", ", while", ", whereas" between two clauses) -3; any other ";" (a list) -1;
  each content word used 3+ times -1 (at most -3); a word repeated back to back
  ("the the") -2.

Every score is clipped to 1..10.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

from propdex.checks.words import content_stems, found_share, supported_stems
from propdex.llm.offline_rules.clauses import clause_joints
from propdex.llm.offline_rules.pronouns import is_expletive_it
from propdex.llm.offline_rules.text import (
    FUNCTION_WORDS,
    STOPWORDS,
    ends_sentence,
    has_verb,
    is_verb_at,
    text_blocks,
    words,
)
from propdex.models import Scores

_LEADING_PRONOUNS = frozenset("it they this these those that he she its their his her".split())
_AUTHOR_PRONOUNS = frozenset({"we", "our", "us"})
_NAME_PRONOUNS = frozenset({"he", "she", "him", "his", "her"})
_THING_PRONOUNS = frozenset({"it", "they", "them", "its", "their"})
_DEMONSTRATIVES = frozenset({"this", "these", "those"})
_FORMER_LATTER = re.compile(r"\bthe (?:former|latter)\b", re.I)
# "exam- ple" is a word broken by extraction; "pre- and post-training" is not.
_BROKEN = re.compile(
    r"\ufffd|\(cid:\d+\)|[\x00-\x08\x0b-\x1f\x7f]|\b[a-z]{2,}- (?!and\b|or\b|to\b)[a-z]{2,}\b"
)
_INNER_PENALTY_CAP = 6


def _clip(value: int) -> int:
    return max(1, min(10, value))


def accuracy(proposition: str, supported: set[str]) -> int:
    return _clip(int(10 * found_share(content_stems(proposition), supported) + 0.5))


def _is_verbish_next(tokens: list[str], index: int) -> bool:
    return index + 1 < len(tokens) and is_verb_at(tokens, index + 1)


def clarity(proposition: str) -> int:
    tokens = words(proposition)
    if not tokens:
        return 1
    score = 10
    lead = tokens[0].lower()
    if lead in _AUTHOR_PRONOUNS or (lead in _LEADING_PRONOUNS and not is_expletive_it(tokens)):
        score -= 4
    inner = 0
    authors_seen = False
    for index in range(1, len(tokens)):
        low = tokens[index].lower()
        if low in _AUTHOR_PRONOUNS and not authors_seen:
            inner += 2
            authors_seen = True
        elif low in _NAME_PRONOUNS:
            names = [t for t in tokens[:index] if t[:1].isupper() and t.lower() not in STOPWORDS]
            if not names:
                inner += 2
        elif low in _THING_PRONOUNS:
            before = [t for t in tokens[:index] if t.lower() not in STOPWORDS]
            if len(before) < 2 and not is_expletive_it(tokens[index:]):
                inner += 2
        elif low in _DEMONSTRATIVES:
            inner += 2 if _is_verbish_next(tokens, index) or index == len(tokens) - 1 else 1
    score -= min(inner, _INNER_PENALTY_CAP)
    if _FORMER_LATTER.search(proposition):
        score -= 3
    if _BROKEN.search(proposition):
        score -= 3
    return _clip(score)


def _unmatched_brackets(text: str) -> bool:
    return text.count("(") != text.count(")") or text.count("[") != text.count("]")


def _unmatched_quotes(text: str) -> bool:
    return text.count('"') % 2 == 1 or text.count("“") != text.count("”")


def completeness(proposition: str) -> int:
    tokens = words(proposition)
    score = 10
    if not has_verb(proposition):
        score -= 5
    stripped = proposition.rstrip()
    if not ends_sentence(stripped) or stripped.rstrip("\"')”’]").endswith(":"):
        score -= 3
    elif tokens and tokens[-1].lower() in FUNCTION_WORDS:
        score -= 3
    if _unmatched_brackets(proposition):
        score -= 3
    if _unmatched_quotes(proposition):
        score -= 2
    if len(tokens) < 3:
        score -= 6
    elif len(tokens) < 5:
        score -= 4
    if proposition[:1].islower():
        score -= 4  # the tail of a sentence
    return _clip(score)


def conciseness(proposition: str, title: str = "") -> int:
    if len(title) > 3:
        # The title (which the proposition rules insert for "we"/"it") counts as one name.
        proposition = re.sub(re.escape(title), "Title", proposition, flags=re.IGNORECASE)
    tokens = words(proposition)
    score = 10
    count = len(tokens)
    # Length costs little: the rules keep the source's own sentence and cannot shorten it
    # (only split it at clause joints, charged below), so a long sentence must not be
    # rejected for its length alone; its facts would be in no other proposition.
    if count > 70:
        score -= 3
    elif count > 50:
        score -= 2
    elif count > 35:
        score -= 1
    joints = clause_joints(proposition)
    score -= 3 * len(joints)
    score -= proposition.count(";") - sum(1 for j in joints if j.group().startswith(";"))
    stems = [s for s in content_stems(proposition) if len(s) >= 4 and not s[0].isdigit()]
    repeated = sum(1 for s in set(stems) if stems.count(s) >= 3)
    score -= min(repeated, 3)
    lowered = [t.lower() for t in tokens]
    if any(a == b and not a[0].isdigit() for a, b in pairwise(lowered)):
        score -= 2
    return _clip(score)


def chunk_stems(chunk_text: str, title: str, section: str | None) -> set[str]:
    joined = "\n".join(text_blocks(chunk_text))
    context = unicodedata.normalize("NFKC", f"{title}\n{section or ''}")
    return supported_stems(joined, (context,))


def grade_propositions(
    chunk_text: str, propositions: list[str], title: str, section: str | None
) -> list[Scores]:
    supported = chunk_stems(chunk_text, title, section)
    scores = []
    for raw in propositions:
        proposition = unicodedata.normalize("NFKC", raw)
        scores.append(
            Scores(
                accuracy=accuracy(proposition, supported),
                clarity=clarity(proposition),
                completeness=completeness(proposition),
                conciseness=conciseness(proposition, title),
            )
        )
    return scores
