"""Content words and grounding: how much of a text is found in the text it came from.

Words are stemmed with Snowball's English (Porter2) stemmer (PyStemmer, the one the search
analyzer uses), lowercased, with the offline rules' stop words left out and numbers kept;
"hare's" counts as "hare". A hyphenated word ("south-west") is found when it or every one
of its parts is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

from propdex.llm.offline_rules.text import STOPWORDS, words

# Words decontextualisation puts in without the chunk saying them: "The authors propose",
# "The paper 'X' shows" (the offline pronoun rules write them, and so does a good LLM).
ALWAYS_GROUNDED_WORDS = ("authors", "paper", "document", "work", "study")

_local = threading.local()  # a PyStemmer object is not safe to share between threads


def _stemmer() -> Stemmer.Stemmer:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


@lru_cache(maxsize=65536)  # a document repeats its vocabulary; lru_cache is thread-safe
def stem(word: str) -> str:
    low = word.lower().replace("’", "'")
    if low.endswith("'s"):
        low = low[:-2]
    return _stemmer().stemWord(low)


@lru_cache(maxsize=65536)
def content_stem(word: str) -> str | None:
    """The stem of a word that carries meaning (numbers included), None for a stop word."""
    low = word.lower()
    if low[0].isdigit() or (len(low) >= 3 and low not in STOPWORDS):
        return stem(low)
    return None


def content_stems(text: str) -> list[str]:
    """Stems of the words that carry meaning, in order: no stop words, numbers kept."""
    return [s for s in map(content_stem, words(text)) if s is not None]


@lru_cache(maxsize=256)  # the header and title repeat for every chunk of a document
def context_stems(text: str) -> frozenset[str]:
    return frozenset(content_stems(text))


ALWAYS_GROUNDED = frozenset(stem(w) for w in ALWAYS_GROUNDED_WORDS)


def supported_stems(text: str, context: Iterable[str] = ()) -> set[str]:
    """The content stems of ``text`` (a chunk) and of its ``context`` (its header, the
    title: short texts shared by many chunks), plus the words decontextualisation may add."""
    supported = set(ALWAYS_GROUNDED)
    supported.update(content_stems(text))
    for short in context:
        supported.update(context_stems(short))
    return supported


def is_found(word_stem: str, supported: set[str]) -> bool:
    if word_stem in supported:
        return True
    parts = [p for p in word_stem.split("-") if p]
    return len(parts) > 1 and all(stem(p) in supported for p in parts)


def found_share(stems: list[str], supported: set[str]) -> float:
    """The share of ``stems`` found in ``supported`` (0 when there are none)."""
    if not stems:
        return 0.0
    return sum(is_found(s, supported) for s in stems) / len(stems)
