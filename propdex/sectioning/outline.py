"""Offline sectioning: the sections a document states itself, never invented ones.

The PDF outline or the Markdown headings found at extraction come first. A document without
either gets its heading-like lines: a numbered heading ("3.2 Results", "1. RISK OF LOSS"),
a labelled one ("ITEM 7.", "Part II", "Chapter 3", "Appendix A") or a short line in capitals,
each standing alone (a blank line or the start of the text before it). Tiny sections are
merged as in the LLM path.
"""

from __future__ import annotations

import re
from collections import Counter

from propdex.models import ExtractedDocument, SectionHint
from propdex.sectioning.guards import LineSection, merge_tiny
from propdex.sectioning.lines import Lines

HEADING_MAX_CHARS = 80
_NUMBERED = re.compile(r"^(?:\d{1,2}(?:\.\d{1,2})*\.?|[IVX]{1,5}\.)\s+[A-Z][^.!?]*$")
_LABELLED = re.compile(r"^(?:ITEM|Item|PART|Part|Chapter|CHAPTER|Appendix|APPENDIX|Section|SECTION)\s+[0-9A-Z]{1,4}\b")
_CAPITALS = re.compile(r"^[^a-z]*[A-Z]{2,}[^a-z]*$")


def is_heading(line: str) -> bool:
    line = line.strip()
    if not line or len(line) > HEADING_MAX_CHARS or line.endswith((",", ";")):
        return False
    if _LABELLED.match(line):
        return True
    if line.endswith((".", ":")) or sum(c.isalpha() for c in line) < 3:
        return False
    if _NUMBERED.match(line):
        return True
    # Table rows in capitals ("REVENUES $ 40,127 ...") are not headings.
    digits = sum(c.isdigit() for c in line)
    return bool(_CAPITALS.match(line)) and not any(c in line for c in "$%") and digits * 5 < len(line)


def heading_sections(text: str) -> list[SectionHint]:
    lines = Lines.of(text)
    starts: list[LineSection] = []
    for n, start in enumerate(lines.starts):
        line = text[start : lines.end(n)]
        after_break = n == 0 or not text[lines.starts[n - 1] : start].strip() or is_heading(
            text[lines.starts[n - 1] : start])
        if after_break and is_heading(line):
            starts.append(LineSection(" ".join(line.split()), n, n))
    if not starts:
        return []
    sections = [
        LineSection(s.title, s.start, (starts[i + 1].start - 1) if i + 1 < len(starts) else len(lines) - 1)
        for i, s in enumerate(starts)
    ]
    if sections[0].start > 0:  # text before the first heading: its own untitled stretch
        sections.insert(0, LineSection("", 0, sections[0].start - 1))
    merged = merge_tiny(sections, lines, min_chars=200, repairs=Counter())
    return [SectionHint(s.title, 1, lines.starts[s.start]) for s in merged if s.title]


def outline_sections(doc: ExtractedDocument) -> list[SectionHint]:
    return list(doc.sections) or heading_sections(doc.text)
