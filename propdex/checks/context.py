"""Title and summary checks: words, not a placeholder, not the prompt said back.

- "no letters": "...", "—", "2023".
- "placeholder": "N/A", "Untitled", "None", "Title", "[Document title]", "Lorem ipsum".
- "echo of the prompt": a run of ``ECHO_WORDS`` consecutive words (all of them, for a
  shorter answer) found in the prompt's instructions but not in the document: "Write
  exactly one sentence of at most 50 words", "Title in the file's metadata".
- summary only, "not a sentence": under ``MIN_SUMMARY_WORDS`` words.
- summary only, "off-topic": fewer than ``MIN_SHARED_WORDS`` of its content words (or under
  ``MIN_SHARED_SHARE`` of them) are found in the text it summarises and its title.

A title need not share words with the text: a descriptive title may name the topic in
words of its own.
"""

from __future__ import annotations

import re

from propdex.checks.words import content_stems, is_found
from propdex.llm.offline_rules.text import words

ECHO_WORDS = 4
MIN_SUMMARY_WORDS = 5
MIN_SHARED_WORDS = 2
MIN_SHARED_SHARE = 0.25

NO_LETTERS = "no letters"
PLACEHOLDER = "placeholder"
ECHO = "echo of the prompt"
NOT_A_SENTENCE = "not a sentence"
OFF_TOPIC = "off-topic"

# What each reason asks of a repaired answer (sent back to the model with the reason).
REPAIR_HINTS = {
    NO_LETTERS: "write it in words",
    PLACEHOLDER: "write the real one, taken from the document",
    ECHO: "do not repeat the instructions; answer about the document",
    NOT_A_SENTENCE: f"write one full sentence of at least {MIN_SUMMARY_WORDS} words",
    OFF_TOPIC: "say what the document itself is about, in its own words",
}

_PLACEHOLDERS = frozenset({
    "untitled", "untitled document", "n a", "na", "none", "null", "nil", "unknown", "tbd",
    "todo", "title", "no title", "the title", "document title", "title here", "your title",
    "your title here", "insert title", "insert title here", "document", "the document",
    "summary", "no summary", "the summary", "summary here", "your summary", "insert summary",
    "insert summary here", "string", "text", "example", "sample", "placeholder", "lorem ipsum",
    "not available", "not applicable", "no data", "empty", "undefined",
})
_NORMAL = re.compile(r"[\W_]+")


def _normal(text: str) -> str:
    return _NORMAL.sub(" ", text.lower()).strip()


def is_placeholder(text: str) -> bool:
    normal = _normal(text)
    return normal in _PLACEHOLDERS or normal.startswith("lorem ipsum")


def _runs(tokens: list[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def _lower_words(text: str) -> list[str]:
    return [w.lower() for w in words(text)]


def is_echo(answer: str, instructions: str, document: str) -> bool:
    """Whether ``answer`` repeats a run of the instructions' words that the document lacks."""
    tokens = _lower_words(answer)
    if len(tokens) < 2 or not instructions:
        return False
    size = min(ECHO_WORDS, len(tokens))
    echoed = _runs(tokens, size) & _runs(_lower_words(instructions), size)
    return bool(echoed - _runs(_lower_words(document), size))


def wording_problem(answer: str, instructions: str = "", document: str = "") -> str | None:
    """What makes ``answer`` no title or summary at all: no letters, a placeholder, an echo."""
    if not any(ch.isalpha() for ch in answer):
        return NO_LETTERS
    if is_placeholder(answer):
        return PLACEHOLDER
    if is_echo(answer, instructions, document):
        return ECHO
    return None


def title_problem(title: str, *, document: str, instructions: str = "") -> str | None:
    """Why ``title`` cannot name ``document`` (a bounded prefix of it), or None."""
    return wording_problem(title, instructions, document)


def summary_problem(
    summary: str, *, document: str, title: str = "", instructions: str = ""
) -> str | None:
    """Why ``summary`` cannot summarise ``document`` (a bounded prefix of it), or None."""
    problem = wording_problem(summary, instructions, document)
    if problem:
        return problem
    if len(words(summary)) < MIN_SUMMARY_WORDS:
        return NOT_A_SENTENCE
    stems = content_stems(summary)
    # Not ``supported_stems``: "This document describes a study" must not pass on the words
    # a proposition may add.
    supported = set(content_stems(document)) | set(content_stems(title))
    found = sum(is_found(s, supported) for s in stems)
    if found < MIN_SHARED_WORDS or found < MIN_SHARED_SHARE * len(stems):
        return OFF_TOPIC
    return None
