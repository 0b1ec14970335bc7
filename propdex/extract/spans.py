"""The text of a layout box from its spans, spaced as printed.

The engine's plain renderer puts a space between every two spans, and a span ends wherever
the font changes, so "d" + subscript "model" read "d model", "0" + "." + "9" in a math font
"0 . 9" and "β" + "1" "β 1": words and numbers were broken for search (and evidence spans
of the evaluation no longer matched). Here two spans of a line are joined with a space only
where the page shows one: a space character at the join or a horizontal gap wider than
``JOIN_GAP`` of the font size. A footnote mark (superscript digits) after a word stays apart
from it ("gradients 4"), an exponent after a symbol joins it ("d2"). Lines are joined with a
space; a word hyphenated at a line end is rejoined ("exam-" + "ple"), a hyphen before a
capital kept ("human-" + "AI").
"""

from __future__ import annotations

JOIN_GAP = 0.15  # of the smaller font size: a narrower gap between spans is no space
FOOTNOTE_AFTER_LETTERS = 3  # a superscript number after a word this long is a footnote mark


def _last_word(text: str) -> str:
    return text.rsplit(" ", 1)[-1]


def _spaced(previous: dict, span: dict, text: str, written: str) -> bool:
    if span["text"][:1].isspace():
        return True
    if span["bbox"][0] - previous["bbox"][2] > JOIN_GAP * min(previous["size"], span["size"]):
        return True
    word = _last_word(written)
    return (bool(span["flags"] & 1) and text.isdigit() and len(word) >= FOOTNOTE_AFTER_LETTERS
            and word.isalpha())


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
        previous = None
        for span in line["spans"]:
            text = span["text"].strip()
            if not text:
                if written and not written.endswith(" "):
                    written += " "
                continue
            if written and not written.endswith(" "):
                if previous is None:
                    join = _line_join(written, text)
                    written = written[:-1] if join == "\b" else written + join
                elif _spaced(previous, span, text, written):
                    written += " "
            written += text
            if span["text"][-1:].isspace():
                written += " "
            previous = span
    return written.strip()
