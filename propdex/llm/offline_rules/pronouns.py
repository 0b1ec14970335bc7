"""Pronoun replacement for the offline propositions (part of ``offline-propositions-v4``).

A leading pronoun is replaced, left to right through the chunk:

- "This paper/work/study" -> "The paper '<title>'"; "We", "Here we", "In this paper, we",
  "Therefore we" and "<intro phrase>, we" -> "... the authors"; "Our X" -> "The authors'
  X"; any other lowercase we/us/our -> "the authors" / "the authors'". The title is not
  repeated in them: put into every author statement it outweighed the statement's own
  words in its embedding and its BM25 terms (dev set R@1 46 -> 58 with the other v2
  rules); the citation names the document anyway.
- "This/It means/shows/suggests/implies/indicates that X" and "That is, X" -> "X".
- "It/This/That" + verb -> the latest singular subject, "They/These/Those" + verb -> the
  latest plural subject, "He/She" -> the latest person-like subject (2-4 capitalised
  words), "Its/Their/His/Her" -> that subject + "'s"; the document title when none fits
  (bare when the title is a name: <= 5 words, no verb, no colon; else "The document
  '<title>'"). An expletive "It is ... that/to" is left alone.
- "This/These/That/Those" + noun -> "The" + noun.

The subject remembered from each proposition is its words before the first verb (after a
leading "In ..., "/"However, " phrase), when that is 1-10 words and not a pronoun; a
subject is plural when its head (the word before "of", else the last word) ends in -s or
it contains "and". When the title is a short proper name ("Leaning Tower of Pisa"),
"the <head noun>" ("the tower") is replaced by the title unless "of" follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from propdex.llm.offline_rules.clauses import RELATIVE_WORDS
from propdex.llm.offline_rules.text import (
    DETERMINERS,
    capitalise_first,
    flatten,
    has_verb,
    is_verb_at,
    words,
)

MAX_SUBJECT_WORDS = 10

_INTRO_WORDS = frozenset(
    "in prior with to after before although though when while as for by on at given since "
    "despite during however moreover additionally finally thus therefore alternatively "
    "furthermore also lastly then here overall similarly unlike like because if once "
    "whereas instead meanwhile nevertheless nonetheless consequently accordingly first "
    "second third today currently recently historically".split()
)
_TRAILING_ADVERBS = frozenset(
    "now also then still often already thus perhaps typically currently first further "
    "only even always never usually generally".split()
)
_NAME_PARTICLES = frozenset("von van de der da del di la le y bin al".split())
_PLURAL_STARTS = frozenset("these those many several both some few".split())
_BE_LIKE = frozenset("is was seems appears remains has would will may might could can".split())

_PAPER = r"(?:paper|work|article|study|report|document)"
_IN_THIS_PAPER_WE = re.compile(rf"^(?:in|throughout) (?:this|the present) {_PAPER},?\s+we\s+", re.I)
_THIS_PAPER = re.compile(rf"^(?:this|the present) ({_PAPER})\b", re.I)
_WE = re.compile(r"^(?:here,?\s+)?we\s+", re.I)
_OUR = re.compile(r"^our\s+", re.I)
_INTRO_THEN_WE = re.compile(r"^([^,]{2,120}),\s+we\s+")
_INTRO_WORD_WE = re.compile(r"^(\w+)\s+we\s+")
# Lowercase only ("US" is a country) and never inside a URL or a longer token.
_AUTHOR_WORD = re.compile(r"(?<![\w/.'’-])(?:we|us|our)(?![\w/'’-])")
_DISCOURSE = re.compile(
    r"^(?:(?:this|that|it)\s+(?:means|shows|suggests|implies|indicates|demonstrates|confirms)"
    r"\s+(?:that\s+)?|(?:that|this) is,\s+)",
    re.I,
)
_LEAD_WORD = re.compile(r"^(\w+)\b\s*(.*)$", re.S)
_SINGULAR = frozenset({"it", "this", "that"})
_PLURAL = frozenset({"they", "these", "those"})
_PERSON = frozenset({"he", "she"})
_POSSESSIVE = {"its": "singular", "their": "plural", "his": "person", "her": "person"}


@dataclass(frozen=True)
class Subject:
    text: str
    plural: bool
    person: bool


def _bare(token: str) -> str:
    return token.strip("()[]{}\"'“”‘’,.;:!?")


def extract_subject(proposition: str) -> Subject | None:
    """The noun phrase before the first verb, after any leading adverbial phrase."""
    tokens = proposition.split()
    start = 0
    if tokens and (_bare(tokens[0]).lower() in _INTRO_WORDS or tokens[0].endswith(",")):
        comma = next((i for i, t in enumerate(tokens[:16]) if t.endswith(",")), None)
        if comma is None:
            return None
        start = comma + 1
    bare = [_bare(t) for t in tokens]
    subject: list[str] = []
    depth = 0
    for index in range(start, len(tokens)):
        token = tokens[index]
        word = bare[index]
        if depth == 0 and not token.startswith("("):
            if is_verb_at(bare, index) or word.lower() in RELATIVE_WORDS:
                break
        depth += token.count("(") - token.count(")")
        if depth == 0 and not token.endswith(")"):
            subject.append(word)
            if token.endswith((",", ";", ":")):
                break  # an appositive or a list follows: the subject ends here
        if len(subject) > MAX_SUBJECT_WORDS:
            return None
    else:
        return None  # no verb: not a clause
    while subject and subject[-1].lower() in _TRAILING_ADVERBS | {"and", "or"}:
        subject.pop()
    if not subject or not subject[0] or not any(w.isalpha() for w in subject):
        return None
    first = subject[0].lower()
    if first in _SINGULAR | _PLURAL | _PERSON | {"we", "i", "you"} or first[0].isdigit():
        return None
    if subject[0][0].islower() and first not in DETERMINERS:
        return None
    lowered = [w.lower() for w in subject]
    head = lowered[lowered.index("of") - 1] if "of" in lowered[1:] else lowered[-1]
    plural = (
        first in _PLURAL_STARTS
        or "and" in lowered
        or (head.endswith("s") and not head.endswith(("ss", "us", "is")))
    )
    person = (
        2 <= len(subject) <= 4
        and first not in DETERMINERS
        and all((w[:1].isupper() and w[1:].islower()) or w in _NAME_PARTICLES for w in subject)
    )
    return Subject(" ".join(subject), plural, person)


def is_expletive_it(tokens: list[str]) -> bool:
    """ "It is important to ...", "It is our hope that ...": "it" refers to nothing."""
    if not tokens or tokens[0].lower() != "it" or len(tokens) < 3:
        return False
    if tokens[1].lower() not in _BE_LIKE:
        return False
    return any(t.lower() in ("that", "to") for t in tokens[2:9])


def _title_head(title: str) -> str | None:
    """The head noun of a short proper-name title ("Leaning Tower of Pisa" -> "tower")."""
    tokens = words(title)
    if not 1 < len(tokens) <= 4 or ":" in title:
        return None
    if any(t[0].islower() and t not in ("of", "the", "de", "von") for t in tokens):
        return None
    head = tokens[tokens.index("of") - 1] if "of" in tokens[1:] else tokens[-1]
    return head.lower() if head.isalpha() and len(head) >= 3 else None


class SubjectTracker:
    """Replaces leading pronouns with the latest fitting subject seen in the chunk."""

    def __init__(self, title: str):
        title = flatten(title) or "the document"
        self.title = title
        self.quoted = f"'{title}'"
        # A name stands on its own ("Eostre"); a paper title ("Attention Is All You Need")
        # reads better quoted.
        is_name = len(title.split()) <= 5 and ":" not in title and not has_verb(title)
        self.fallback = title if is_name else f"The document {self.quoted}"
        head = _title_head(title)
        self.head_pattern = (
            re.compile(rf"\bthe {re.escape(head)}\b(?! of\b)", re.I) if head else None
        )
        self.subjects: list[Subject] = []

    def _antecedent(self, kind: str) -> str:
        for subject in reversed(self.subjects):
            if kind == "person" and subject.person:
                return subject.text
            if kind == "plural" and subject.plural and not subject.person:
                return subject.text
            if kind == "singular" and not subject.plural and not subject.person:
                return subject.text
        return self.fallback

    def _replace_lead(self, text: str) -> str:
        match = _IN_THIS_PAPER_WE.match(text)
        if match:
            return "The authors " + text[match.end() :]
        match = _THIS_PAPER.match(text)
        if match:
            return f"The {match.group(1).lower()} {self.quoted}" + text[match.end() :]
        match = _WE.match(text)
        if match:
            return "The authors " + text[match.end() :]
        match = _OUR.match(text)
        if match:
            return "The authors' " + text[match.end() :]
        match = _INTRO_THEN_WE.match(text)
        if match and _bare(text.split()[0]).lower() in _INTRO_WORDS:
            return f"{match.group(1)}, the authors " + text[match.end() :]
        match = _INTRO_WORD_WE.match(text)
        if match and match.group(1).lower() in _INTRO_WORDS:
            return f"{match.group(1)} the authors " + text[match.end() :]
        match = _DISCOURSE.match(text)
        if match and len(words(text[match.end() :])) >= 4:
            return capitalise_first(text[match.end() :])
        match = _LEAD_WORD.match(text)
        if not match:
            return text
        lead, rest = match.group(1).lower(), match.group(2)
        tokens = words(text)
        if lead in _POSSESSIVE:
            owner = self._antecedent(_POSSESSIVE[lead])
            return f"{owner}'" + ("" if owner.endswith("s") else "s") + f" {rest}"
        if lead not in _SINGULAR | _PLURAL | _PERSON or is_expletive_it(tokens):
            return text
        adverb_then_verb = (
            len(tokens) > 2
            and (tokens[1].lower().endswith("ly") or tokens[1].lower() in _TRAILING_ADVERBS)
            and is_verb_at(tokens, 2)
        )
        next_is_verb = len(tokens) > 1 and (is_verb_at(tokens, 1) or adverb_then_verb)
        if lead in ("this", "these", "that", "those") and not next_is_verb:
            return f"The {rest}"  # a determiner: "This framework ..." -> "The framework ..."
        kind = "person" if lead in _PERSON else "plural" if lead in _PLURAL else "singular"
        return f"{self._antecedent(kind)} {rest}"

    def _replace_inner_authors(self, text: str) -> str:
        """Every other we/us/our."""

        def replace(match: re.Match[str]) -> str:
            return "the authors'" if match.group().lower() == "our" else "the authors"

        return _AUTHOR_WORD.sub(replace, text)

    def resolve(self, clause: str) -> str:
        text = capitalise_first(self._replace_inner_authors(self._replace_lead(clause)))
        if self.head_pattern and self.title.lower() not in text.lower():
            text = capitalise_first(self.head_pattern.sub(self.title, text, count=1))
        subject = extract_subject(text)
        if subject:
            self.subjects.append(subject)
        return text
