"""Text clean-up shared by every extractor.

Each step is one compiled regex pass run by the C regex engine, so normalising a page costs
a fraction of extracting it; there is no per-character Python loop.
"""

from __future__ import annotations

import re

# Characters that need mapping: control characters (NUL included), tabs and odd spaces,
# soft hyphens and zero-width marks, ligature code points (PDF outlines and text files can
# carry them even when MuPDF expands the ones it draws).
_REPLACEMENTS: dict[str, str] = {
    "\t": " ",
    "\r": "\n",
    "\x0b": "\n",
    "\x0c": "\n",
    "\x85": "\n",
    "\u2028": "\n",
    "\u2029": "\n",
    "\u00a0": " ",
    "\u1680": " ",
    "\u202f": " ",
    "\u205f": " ",
    "\u3000": " ",
    "\u00ad": "",  # soft hyphen: invisible unless a line breaks at it
    "\u200b": "",
    "\u2060": "",
    "\ufeff": "",
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",  # long s + t
    "\ufb06": "st",
}
_REPLACEMENTS.update(
    {
        chr(c): ""
        for c in (*range(0x00, 0x09), *range(0x0E, 0x20), *range(0x7F, 0x85), *range(0x86, 0xA0))
    }
)
_REPLACEMENTS.update({chr(c): " " for c in range(0x2000, 0x200B)})  # en quad .. hair space
_ODD_CHARACTER = re.compile("[" + re.escape("".join(_REPLACEMENTS)) + "]")

# Patterns start with a literal so the regex engine skips ahead with a fast string search.
_SPACE_RUN = re.compile("  +")
_TRAILING_SPACE = re.compile(" +\n")
_NEWLINE_RUN = re.compile("\n\n\n+")
_HYPHEN_BREAK = re.compile(r"-\n(?=\w)")  # a word broken by a hyphen at a line end

LIGATURES = {k: v for k, v in _REPLACEMENTS.items() if "\ufb00" <= k <= "\ufb06"}


def _replace_odd(match: re.Match[str]) -> str:
    return _REPLACEMENTS[match.group()]


def _collapse_space_run(match: re.Match[str]) -> str:
    start = match.start()
    if start == 0 or match.string[start - 1] == "\n":
        return match.group()  # leading indentation (Markdown code, nested lists) is kept
    return " "


def _join_hyphen_break(match: re.Match[str]) -> str:
    text = match.string
    start = match.start()
    before = text[start - 1] if start else " "
    if not (before.isalnum() or before == "_"):
        return match.group()  # " -\n" is a dash or a list marker, not a broken word
    # "exam-\nple" is one word split by the typesetter; "Human-\nAI" or "2019-\n2020" keep
    # their hyphen, only the line break goes.
    return "" if before.isalpha() and text[match.end()].islower() else "-"


def tidy_whitespace(text: str) -> str:
    """Map control characters, odd spaces and ligatures; collapse space runs inside lines,
    drop trailing spaces, keep single newlines, cap blank lines at one; strip the ends."""
    # The substring tests are much cheaper than a regex pass that finds nothing.
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    text = _ODD_CHARACTER.sub(_replace_odd, text)
    if "  " in text:
        text = _SPACE_RUN.sub(_collapse_space_run, text)
    if " \n" in text:
        text = _TRAILING_SPACE.sub("\n", text)
    if "\n\n\n" in text:
        text = _NEWLINE_RUN.sub("\n\n", text)
    return text.strip()


def dehyphenate(text: str) -> str:
    """Join words hyphenated across a line break ("exam-\\nple" -> "example")."""
    return _HYPHEN_BREAK.sub(_join_hyphen_break, text)


def normalise_pdf_text(text: str) -> str:
    """One page of PDF text as stored: tidied, then dehyphenated (after the tidy, so a
    hyphen followed by trailing spaces still counts as a line-end hyphen)."""
    return dehyphenate(tidy_whitespace(text))


def non_space_length(text: str) -> int:
    """Non-whitespace characters of tidied text (where spaces and newlines are the only
    whitespace left: tidy_whitespace maps every other str.isspace character)."""
    return len(text) - text.count(" ") - text.count("\n")


def expand_ligatures(text: str) -> str:
    return text.translate(str.maketrans(LIGATURES)) if text else text
