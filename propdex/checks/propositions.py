"""Proposition checks: each proposition of a chunk is grounded, long enough and new.

A proposition is rejected (stored, never passed, whatever its grades) with one reason:

- "empty": no content word at all ("", "...", "N/A");
- "too short": under ``MIN_WORDS`` words (a fact needs a subject, a verb and an object);
- "duplicate": the same content words in the same order as an earlier proposition of the
  chunk (case, punctuation, stop words and word endings aside): "ByteNet outperforms the
  Transformer" is not a duplicate of "the Transformer outperforms ByteNet";
- "ungrounded": under ``MIN_GROUNDED_SHARE`` of its content words are found in the chunk,
  its contextual header or the document title. Decontextualisation may add the title's and
  a section's words (they are in the header) and resolve pronouns to names the chunk
  states, so a faithful proposition keeps nearly all of its words grounded; an off-topic
  sentence or an echo of the prompt keeps few.

Calibration: the 16 gold propositions of the Dense X examples
(../shared/corpus/dense-x/propositionizer_examples.json) have shares of 0.8 (one: "writes a
hypothesis about the possible explanation") and 1.0 (fifteen); the threshold leaves a
margin below 0.8 so that a paraphrase adding a word or two still passes.
"""

from __future__ import annotations

from collections.abc import Iterable

from propdex.checks.words import content_stems, found_share, supported_stems
from propdex.llm.offline_rules.text import words

MIN_WORDS = 4
MIN_GROUNDED_SHARE = 0.6

EMPTY = "empty"
TOO_SHORT = "too short"
DUPLICATE = "duplicate"
UNGROUNDED = "ungrounded"
REASONS = (EMPTY, TOO_SHORT, DUPLICATE, UNGROUNDED)


def proposition_problems(
    propositions: list[str], chunk_text: str, context: Iterable[str] = ()
) -> list[str | None]:
    """Per proposition (same order), why the checks reject it, or None when it passes.
    It may draw on ``chunk_text`` and its ``context``: the chunk's header, the title."""
    supported = supported_stems(chunk_text, context)
    seen: set[tuple[str, ...]] = set()
    problems: list[str | None] = []
    for text in propositions:
        stems = content_stems(text)
        key = tuple(stems)
        if not stems:
            problems.append(EMPTY)
        elif len(words(text)) < MIN_WORDS:
            problems.append(TOO_SHORT)
        elif key in seen:
            problems.append(DUPLICATE)
        elif found_share(stems, supported) < MIN_GROUNDED_SHARE:
            problems.append(UNGROUNDED)
        else:
            problems.append(None)
        seen.add(key)
    return problems
