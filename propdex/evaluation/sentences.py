"""Sentences of a document with their character offsets, for the sentence retrieval unit.

Segmentation is the offline backend's (``block_sentences``: PDF hard line breaks undone,
headings and list items kept apart, then pysbd). Those sentences come back flattened and
slightly edited (page-number lines and footnote marks dropped), so each is placed in the
document by aligning its word tokens with the document's: the first token is looked for
a little ahead of where the previous sentence ended, later ones may skip a few document
tokens (a dropped page number). The span runs from the first aligned token to the last,
plus any closing punctuation, so ``text[start:end]`` is the sentence as the document has it.
"""

from __future__ import annotations

import logging
import re

from propdex.evaluation.matching import TokenIndex, tokens
from propdex.llm.offline_rules.text import block_sentences

log = logging.getLogger("propdex.evaluation")

# How far past the previous sentence a sentence's first token may be (tokens dropped by
# the segmenter between sentences: page numbers, footnote marks, a skipped line).
START_WINDOW = 60
# How many document tokens may be skipped between two tokens of one sentence.
GAP = 4
_CLOSING = re.compile(r"[^\w\s]*")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the sentences of ``text``, in document order."""
    index = TokenIndex.of(text)
    doc_tokens = index.tokens
    spans: list[tuple[int, int]] = []
    cursor = 0
    unplaced = 0
    for sentence in block_sentences(text):
        wanted = tokens(sentence)
        if not wanted:
            continue  # punctuation only ("." after an equation): nothing to retrieve
        placed = _align(doc_tokens, wanted, cursor)
        if placed is None:
            unplaced += 1
            continue
        first, last = placed
        end = index.ends[last]
        end += _CLOSING.match(text, end).end() - end
        spans.append((index.starts[first], end))
        cursor = last + 1
    if unplaced:
        log.warning("%d of %d sentences could not be placed in the document text",
                    unplaced, unplaced + len(spans))
    return spans


def _align(doc_tokens: list[str], wanted: list[str], cursor: int) -> tuple[int, int] | None:
    """Token indices of the first and last document tokens matching ``wanted`` (not
    empty) from ``cursor`` on; None when the first token is not found near the cursor."""
    limit = min(len(doc_tokens), cursor + START_WINDOW)
    first = next((i for i in range(cursor, limit) if doc_tokens[i] == wanted[0]), None)
    if first is None:
        return None
    last = first
    for token in wanted[1:]:
        step = next((i for i in range(last + 1, min(len(doc_tokens), last + 2 + GAP))
                     if doc_tokens[i] == token), None)
        if step is None:
            break  # the rest of the sentence did not align; keep what did
        last = step
    return first, last
