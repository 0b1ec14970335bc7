"""The text handed to the embedder: a chunk's or sentence's text without the Markdown marks
that carry no meaning for the model.

The layout reader writes headings and footnotes as Markdown ("### 3.5 Positional Encoding",
"> 4 To illustrate"); the fast reader's text of the same page has neither mark. Embedded as
is, the marks pull a chunk's vector away from the plain-language query. Only the vector's
input changes: stored text, offsets, full-text search and what search returns keep the
Markdown. Tables keep their pipes and delimiter row ("|---|"): without the row, prose chunks
outranked the table chunks that answer table questions (bench/RESULTS.md, 2026-11-27). A
Markdown-to-text library is not used because it would also drop emphasis, links, list
markers and the table syntax.
"""

from __future__ import annotations

import re

# A heading's "#" run (ATX heading: up to three spaces of indent, 1-6 "#", then a space).
_HEADING_MARK = re.compile(r"^ {0,3}#{1,6}[ \t]+", re.MULTILINE)
# A block quote's ">" marks, nested ones too ("> > text").
_QUOTE_MARK = re.compile(r"^ {0,3}(?:>[ \t]?)+", re.MULTILINE)


def embedding_text(text: str) -> str:
    """``text`` without heading marks and block-quote marks."""
    return _QUOTE_MARK.sub("", _HEADING_MARK.sub("", text))
