"""Answer and evidence matching that ignores case, whitespace and punctuation.

Texts are compared as sequences of word tokens (runs of letters and digits, NFKC-normalised
and case-folded), so "5,841" matches "5 841", curly and straight quotes are the same, and a
PDF's hard line break inside a quoted span does not matter. Matches align on token
boundaries: "16" is not found inside "2016". The layout reader's exponent caret joins a
token ("10^19" and "1019" are both the token "1019"), so evidence copied from a PDF viewer,
where a superscript reads flat, still matches. A match in the document is mapped back to
character offsets (first token's start to last token's end), which is how evidence spans
are placed against the chunks' ``char_start``/``char_end``.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

_TOKEN = re.compile(r"[^\W_]+(?:\^[^\W_]+)*")


def _fold(token: str) -> str:
    return unicodedata.normalize("NFKC", token).casefold().replace("^", "")


def tokens(text: str) -> list[str]:
    return [_fold(m.group()) for m in _TOKEN.finditer(text)]


def normalise(text: str) -> str:
    """The comparison form of ``text``: its tokens joined by single spaces."""
    return " ".join(tokens(text))


def contains(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` on token boundaries (an empty needle never
    does). Either argument may already be normalised."""
    wanted = normalise(needle)
    return bool(wanted) and f" {wanted} " in f" {normalise(haystack)} "


def contains_normalised(haystack: str, needle: str) -> bool:
    """``contains`` for two already normalised texts (the hot path of relevance checks)."""
    return bool(needle) and f" {needle} " in f" {haystack} "


@dataclass(frozen=True)
class TokenIndex:
    """A document's tokens with their character offsets, for finding spans in it."""

    joined: str  # " tok tok ... tok " -- every token framed by spaces
    positions: list[int]  # where each token starts in ``joined``
    starts: list[int]  # each token's start in the original text
    ends: list[int]  # each token's end (exclusive) in the original text

    @classmethod
    def of(cls, text: str) -> TokenIndex:
        positions, starts, ends, parts = [], [], [], []
        cursor = 1
        for match in _TOKEN.finditer(text):
            token = _fold(match.group())
            positions.append(cursor)
            starts.append(match.start())
            ends.append(match.end())
            parts.append(token)
            cursor += len(token) + 1
        return cls(" " + " ".join(parts) + " ", positions, starts, ends)

    @property
    def tokens(self) -> list[str]:
        return self.joined.split()

    def find(self, needle: str) -> list[tuple[int, int]]:
        """Character spans of every occurrence of ``needle`` in the original text."""
        wanted = normalise(needle)
        if not wanted:
            return []
        count = wanted.count(" ") + 1
        framed = f" {wanted} "
        spans = []
        at = self.joined.find(framed)
        while at >= 0:
            first = bisect.bisect_left(self.positions, at + 1)
            last = first + count - 1
            spans.append((self.starts[first], self.ends[last]))
            at = self.joined.find(framed, at + 1)
        return spans


def overlaps(span: tuple[int, int], start: int, end: int) -> bool:
    """Whether the half-open character ranges [span) and [start, end) share a character."""
    return span[0] < end and start < span[1]
