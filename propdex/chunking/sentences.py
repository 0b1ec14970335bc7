"""Sentence spans with exact offsets, for the passages and semantic chunkers.

pysbd treats a newline as a sentence end, and PDF text wraps every line. So pysbd reads a
copy of the text of the same length in which a single line break inside a paragraph is a
space; a break after a heading-like line (short, no closing punctuation, mostly capitalised
words) or before a list item stays. A blank line after a long line that ends no sentence
(a page break, or a figure set, in mid-sentence) is spaces too, so a sentence cut by a page
is one sentence. Only sentence starts are taken from pysbd: the spans tile the text between
them, so every non-whitespace character lies in exactly one sentence whatever pysbd does.
"""

from __future__ import annotations

import re
import threading

import pysbd

from propdex.chunking.base import trim_span

# A line this short without closing punctuation is taken for a heading: the break after it stays.
HEADING_MAX_CHARS = 60
_WRAPPED_BREAK = re.compile(r"(?<=\S)[ \t]*\n(?=[ \t]*\S)")
_CLOSING = tuple(".!?:;,")
# A blank line after prose that ends no sentence, before more prose (not a heading, table
# row, quote or list item): a page break, or a figure set, inside a sentence.
_BROKEN_PARAGRAPH = re.compile(r"(?<=[^\s.!?:;|])\n\n(?=[^\s#|>*•-])")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*•◦▪]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s")

_local = threading.local()


def _segmenter() -> pysbd.Segmenter:
    # pysbd keeps per-call state on the instance: one per thread.
    if not hasattr(_local, "segmenter"):
        _local.segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    return _local.segmenter


def unwrap_lines(text: str) -> str:
    """``text`` with paragraph-internal line breaks turned into spaces (same length), and
    the blank line of a page break that falls in mid-sentence too."""
    chars = list(text)
    for match in _WRAPPED_BREAK.finditer(text):
        newline = match.end() - 1
        line_start = text.rfind("\n", 0, match.start()) + 1
        line = text[line_start : match.start()].strip()
        heading = len(line) <= HEADING_MAX_CHARS and not line.endswith(_CLOSING) and is_title_like(line)
        if heading or _LIST_ITEM.match(text, newline + 1):
            continue
        chars[newline] = " "
    for match in _BROKEN_PARAGRAPH.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if match.start() - line_start > HEADING_MAX_CHARS and not _LIST_ITEM.match(text, match.end()):
            chars[match.start() : match.end()] = " " * (match.end() - match.start())
    return "".join(chars)


def is_title_like(line: str) -> bool:
    """At least half the words start with a capital or a digit ("2. Risk of Loss")."""
    words = line.split()
    return sum(w[0].isupper() or w[0].isdigit() for w in words) * 2 >= len(words)


def sentence_starts(text: str) -> list[int]:
    """Offsets where pysbd says a sentence starts (the first non-whitespace character)."""
    reading = unwrap_lines(text)
    starts: list[int] = []
    cursor = 0
    for piece in _segmenter().segment(reading):
        # pysbd's offsets drift on some inputs; its sentence text is looked up from the cursor.
        stripped = piece.sent.strip()
        if not stripped:
            continue
        found = piece.start if reading.startswith(stripped, max(piece.start, cursor)) else -1
        found = reading.find(stripped, cursor) if found < cursor else found
        if found < 0:
            continue
        starts.append(found)
        cursor = found + len(stripped)
    return starts


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Trimmed spans tiling ``text`` from one sentence start to the next."""
    first = trim_span(text, 0, len(text))
    if first is None:
        return []
    edges = sorted({first[0], *(s for s in sentence_starts(text) if s > first[0])})
    spans = []
    for start, end in zip(edges, [*edges[1:], len(text)], strict=True):
        span = trim_span(text, start, end)
        if span is not None:
            spans.append(span)
    return spans
