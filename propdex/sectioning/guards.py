"""Sections from an LLM answer made usable: ordered, non-overlapping, covering, not tiny.

A model's sections are taken as evidence, not as truth. Line numbers outside the range
asked about are clamped, a section ending before it starts is dropped, sections are sorted,
an overlapping start is moved past the previous section's end, lines no section claims
join the section before them (or the first section), and a section with fewer than
``min_chars`` non-whitespace characters joins its neighbour. Every repair is counted so the
caller can say what it fixed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from propdex.sectioning.lines import Lines

# Fewer non-whitespace characters than this make a section too small to stand alone
# (dsRAG asks for sections from a few paragraphs to a few pages long).
MIN_SECTION_CHARS = 200


@dataclass(frozen=True)
class LineSection:
    title: str
    start: int  # first line
    end: int  # last line (inclusive)


def repair_sections(
    proposed: list[LineSection], first: int, last: int, lines: Lines,
    min_chars: int = MIN_SECTION_CHARS,
) -> tuple[list[LineSection], Counter[str]]:
    """Sections covering lines ``first``..``last`` exactly, and the repairs made."""
    repairs: Counter[str] = Counter()
    valid = []
    for section in proposed:
        start, end = max(first, min(section.start, last)), max(first, min(section.end, last))
        if (start, end) != (section.start, section.end):
            repairs["out of range"] += 1
        if start > end or not section.title:
            repairs["dropped (empty or untitled)"] += 1
            continue
        valid.append(LineSection(section.title, start, end))
    ordered = sorted(valid, key=lambda s: (s.start, s.end))
    if ordered != valid:
        repairs["unordered"] += 1
    kept: list[LineSection] = []
    for section in ordered:
        start = section.start
        if kept and start <= kept[-1].end:
            repairs["overlapping"] += 1
            start = kept[-1].end + 1
            if start > section.end:
                continue
        if kept and start > kept[-1].end + 1:
            repairs["uncovered lines"] += start - kept[-1].end - 1
            kept[-1] = LineSection(kept[-1].title, kept[-1].start, start - 1)
        kept.append(LineSection(section.title, start, section.end))
    if not kept:
        return [], repairs
    if kept[0].start > first:
        repairs["uncovered lines"] += kept[0].start - first
        kept[0] = LineSection(kept[0].title, first, kept[0].end)
    if kept[-1].end < last:
        repairs["uncovered lines"] += last - kept[-1].end
        kept[-1] = LineSection(kept[-1].title, kept[-1].start, last)
    return merge_tiny(kept, lines, min_chars, repairs), repairs


def merge_tiny(
    sections: list[LineSection], lines: Lines, min_chars: int, repairs: Counter[str]
) -> list[LineSection]:
    """Sections under ``min_chars`` joined to the section before them (the first one to the
    section after it, which keeps its own title)."""
    merged: list[LineSection] = []
    for section in sections:
        if merged and lines.chars(section.start, section.end) < min_chars:
            repairs["tiny"] += 1
            merged[-1] = LineSection(merged[-1].title, merged[-1].start, section.end)
        elif merged and lines.chars(merged[-1].start, merged[-1].end) < min_chars:
            repairs["tiny"] += 1
            merged[-1] = LineSection(section.title, merged[-1].start, section.end)
        else:
            merged.append(section)
    return merged
