"""The text of a layout box from its spans, spaced as printed.

The engine's plain renderer puts a space between every two spans, and a span ends wherever
the font changes, so "d" + subscript "model" read "d model", "0" + "." + "9" in a math font
"0 . 9" and "β" + "1" "β 1": words and numbers were broken for search (and evidence spans
of the evaluation no longer matched). Here two spans of a line are joined with a space only
where the page shows one: a space character at the join or a horizontal gap wider than
``JOIN_GAP`` of the font size. Lines are joined with a space; a word hyphenated at a line
end is rejoined ("exam-" + "ple"), a hyphen before a capital kept ("human-" + "AI").

A superscript (set smaller than the text beside it, its baseline raised) is kept
distinguishable, as a reader tells it apart by its size: an exponent after a number or a
one- or two-letter symbol is written with a caret ("2.3 · 10^19", "QK^T"), where plain
text would read another number ("1019"); a footnote mark stays apart from its word
("gradients 4") and from the first word of its footnote ("4 To illustrate"); an ordinal
suffix joins its number ("21st").

The engine joins neighbouring spans of one style whatever their size, so a footnote's mark
and its first words arrive as one span ("4To illustrate"): ``split_merged_spans`` puts
back the spans MuPDF gave, from the page's own text, before any of this.
"""

from __future__ import annotations

import re

import pymupdf

JOIN_GAP = 0.15  # of the smaller font size: a narrower gap between spans is no space
FOOTNOTE_AFTER_LETTERS = 3  # a superscript after a word this long is a footnote mark
SUPERSCRIPT_SIZE = 0.85  # a superscript is set at most this fraction of its neighbour's size
SUPERSCRIPT_RISE = 0.15  # and its baseline at least this fraction of that size higher
EXPONENT = "^"
# Marks a footnote is referenced by besides numbers.
_FOOTNOTE_SYMBOLS = set("*∗†‡§¶")
# Spans MuPDF gives for the page: without the styles and vectors the engine collects, which
# matching its spans does not need.
RAW_TEXT_FLAGS = (pymupdf.TEXT_ACCURATE_BBOXES | pymupdf.TEXT_MEDIABOX_CLIP
                  | pymupdf.TEXT_IGNORE_ACTUALTEXT)
LINE_TOLERANCE = 3.0  # points: spans this close in height are one line (as the engine has it)
_BUCKET = 8.0  # points of height per bucket of the raw-span index
_TRAILING_WORD = re.compile(r"[^\W_]*$")  # the letters and digits text ends with


def _last_word(text: str) -> str:
    return text.rsplit(" ", 1)[-1]


def is_raised(span: dict, neighbour: dict | None) -> bool:
    """Whether ``span`` is a superscript beside ``neighbour`` (a span of the same line):
    smaller and with a higher baseline. MuPDF's superscript flag alone is not enough: it
    is missing on a line's first span and set on text after a subscript."""
    if neighbour is None or "origin" not in span or "origin" not in neighbour:
        return False
    size = neighbour["size"]
    return (span["size"] <= SUPERSCRIPT_SIZE * size
            and span["origin"][1] < neighbour["origin"][1] - SUPERSCRIPT_RISE * size)


def _is_mark(text: str) -> bool:
    return all(c.isdigit() or c in ",-–" or c in _FOOTNOTE_SYMBOLS for c in text)


def _before_superscript(written: str, text: str) -> str:
    """What goes between written text and a superscript that touches it."""
    word = _TRAILING_WORD.search(written).group()
    last = written[-1:]
    if last.isdigit() and text.isalpha():
        return ""  # an ordinal: "21" + "st"
    if word and (last.isdigit() or len(word) < FOOTNOTE_AFTER_LETTERS):
        return EXPONENT  # "10" + "19", "QK" + "T", "O(n" + "2"
    if text[:1].isdigit() and _is_mark(text):
        return " "  # a footnote number after a word or a full stop ("Vaswani∗" keeps its star)
    return ""


def _spaced(previous: dict, span: dict) -> bool:
    if span["text"][:1].isspace():
        return True
    return span["bbox"][0] - previous["bbox"][2] > JOIN_GAP * min(previous["size"], span["size"])


def _line_join(written: str, text: str) -> str:
    """What goes between the end of a line and the next line's first text."""
    word = _last_word(written)
    if word.endswith("-") and len(word) > 3 and word[-2].isalpha():
        return "\b" if text[:1].islower() else ""  # "\b": drop the hyphen
    return " "


def lines_text(lines: list[dict]) -> str:
    """The text of the engine's text lines (each a dict with "spans"), spaced as printed."""
    written = ""
    for line in lines:
        spans = [s for s in line["spans"] if s["text"].strip()]
        previous = None
        previous_raised = False  # an exponent goes on over several spans ("−" + "9")
        base = None  # the last span on the line's baseline, which superscripts are set against
        for span in line["spans"]:
            text = span["text"].strip()
            if not text:
                if written and not written.endswith(" "):
                    written += " "
                continue
            raised = is_raised(span, base or next((s for s in spans if s is not span), None))
            if written and not written.endswith(" "):
                if previous is None:
                    join = _line_join(written, text)
                    written = written[:-1] if join == "\b" else written + join
                elif _spaced(previous, span):
                    written += " "
                elif raised and not previous_raised:
                    written += _before_superscript(written, text)
            written += text
            if span["text"][-1:].isspace() or (raised and previous is None and _is_mark(text)):
                written += " "  # a footnote's mark before its first word
            previous, previous_raised = span, raised
            if not raised:
                base = span
    return written.strip()


def footnotes_text(lines: list[dict]) -> str:
    """A footnote box as Markdown block quotes, one per footnote: a line that starts with a
    superscript mark starts a footnote."""
    notes: list[list[dict]] = []
    for line in lines:
        spans = [s for s in line["spans"] if s["text"].strip()]
        if not notes or (len(spans) > 1 and is_raised(spans[0], spans[1])):
            notes.append([])
        notes[-1].append(line)
    return "\n\n".join("> " + lines_text(note) for note in notes)


def page_spans(page: pymupdf.Page) -> dict[int, list[dict]]:
    """The page's non-blank spans as MuPDF gives them, each with its line's rectangle as
    its height (as the engine sets it), indexed by height bucket."""
    index: dict[int, list[dict]] = {}
    for block in page.get_textpage(flags=RAW_TEXT_FLAGS).extractDICT()["blocks"]:
        for line in block.get("lines", []):
            y0, y1 = line["bbox"][1], line["bbox"][3]
            for span in line["spans"]:
                if not span["text"].strip():
                    continue
                x0, _, x1, _ = span["bbox"]
                raw = dict(span, bbox=(x0, y0, x1, y1))
                index.setdefault(int((y0 + y1) / 2 / _BUCKET), []).append(raw)
    return index


def split_merged_spans(lines: list[dict], raw: dict[int, list[dict]]) -> None:
    """Replace, in place, each engine span that is several MuPDF spans joined (the engine
    joins neighbours of one style whatever their size) by those spans, where their texts
    make up its text exactly; a span that cannot be matched stays as it is."""
    for line in lines:
        parts: list[dict] = []
        for span in line["spans"]:
            parts += _pieces(span, raw) or [span]
        line["spans"] = parts


def _spans_within(raw: dict[int, list[dict]], rect: tuple[float, float, float, float],
                  slack: float = 0.0) -> list[dict]:
    """The spans of ``raw`` whose centre lies in ``rect`` widened by ``slack`` points."""
    x0, y0, x1, y1 = rect
    return [
        s for bucket in range(int(y0 / _BUCKET) - 1, int(y1 / _BUCKET) + 2)
        for s in raw.get(bucket, [])
        if x0 - slack <= (s["bbox"][0] + s["bbox"][2]) / 2 <= x1 + slack
        and y0 - slack <= (s["bbox"][1] + s["bbox"][3]) / 2 <= y1 + slack
    ]


def _pieces(span: dict, raw: dict[int, list[dict]]) -> list[dict] | None:
    found = _spans_within(raw, tuple(span["bbox"]), slack=0.5)
    if len(found) < 2:
        return None
    found.sort(key=lambda s: s["bbox"][0])
    if "".join(s["text"] for s in found) != span["text"]:
        return None
    return found


def _cell_lines(rect: tuple[float, float, float, float], raw: dict[int, list[dict]]) -> list[dict]:
    """The spans whose centre lies in ``rect`` as printed lines, each left to right."""
    lines: list[dict] = []
    for span in sorted(_spans_within(raw, rect), key=lambda s: s["bbox"][3]):
        # One printed line, as the engine joins them: tops or bottoms within LINE_TOLERANCE
        # (a superscript is a line of its own for MuPDF).
        last = lines[-1]["spans"][-1]["bbox"] if lines else None
        if last and (abs(span["bbox"][3] - last[3]) <= LINE_TOLERANCE
                     or abs(span["bbox"][1] - last[1]) <= LINE_TOLERANCE):
            lines[-1]["spans"].append(span)
        else:
            lines.append({"spans": [span]})
    for line in lines:
        line["spans"].sort(key=lambda s: s["bbox"][0])
    return lines


def cell_text(rect: tuple[float, float, float, float], raw: dict[int, list[dict]]) -> str:
    """The text of the spans whose centre lies in ``rect`` (a table cell), spaced as printed."""
    return lines_text(_cell_lines(rect, raw))


def superscript_cell_text(rect: tuple[float, float, float, float],
                          raw: dict[int, list[dict]]) -> str | None:
    """A table cell's text from the page's spans where the cell holds a superscript (its
    plain extract reads "2.3 · 1019" for 2.3 · 10^19), else None."""
    lines = _cell_lines(rect, raw)
    if not any(is_raised(span, before) for line in lines
               for span, before in zip(line["spans"][1:], line["spans"], strict=False)):
        return None
    return lines_text(lines)
