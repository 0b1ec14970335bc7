"""The text handed to the embedder: a chunk's or sentence's text without the Markdown syntax
that carries no meaning for the model.

The layout reader writes headings, footnotes and tables as Markdown ("### 3.5 Positional
Encoding", "> 4 To illustrate", "| a | b |" over "|---|---|"); the fast reader's text of the
same page has none of it. Embedded as is, those marks pull a chunk's vector away from the
plain-language query. Only the vector's input changes: stored text, offsets, full-text search
and what search returns keep the Markdown. Pipes between table cells stay: they tell the
model where one cell ends. A Markdown-to-text library is not used because it would also drop
emphasis, links and list markers, which both readers write alike.
"""

from __future__ import annotations

import re

# A heading's "#" run (ATX heading: up to three spaces of indent, 1-6 "#", then a space).
_HEADING_MARK = re.compile(r"^ {0,3}#{1,6}[ \t]+", re.MULTILINE)
# A block quote's ">" marks, nested ones too ("> > text").
_QUOTE_MARK = re.compile(r"^ {0,3}(?:>[ \t]?)+", re.MULTILINE)
# A table's delimiter row ("|---|:--:|"), with its line break.
_TABLE_DELIMITER_ROW = re.compile(
    r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*(?:\n|$)", re.MULTILINE
)


def embedding_text(text: str) -> str:
    """``text`` without heading marks, block-quote marks and table delimiter rows."""
    text = _TABLE_DELIMITER_ROW.sub("", text)
    text = _HEADING_MARK.sub("", text)
    return _QUOTE_MARK.sub("", text)
