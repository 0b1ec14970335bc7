"""Offline title rules (``offline-title-v3``).

0. A regulatory filing's cover page (SEC forms 10-K, 10-Q, 20-F, 8-K...): its first lines are
   form boilerplate ("FORM 10-K ... SECURITIES AND EXCHANGE COMMISSION"), so the title is
   built from the registrant's name (the line above "(Exact name of registrant ...)"), the
   form and the period ("NIKE, Inc. Form 10-K, fiscal year ended May 31, 2023").
1. The hint (PDF metadata title, Markdown H1) when it is plausible: 2..250 characters, mostly
   letters, not a file name, not "Untitled"/"Microsoft Word - ..." and not a date/URL/id.
2. Otherwise the first heading-like line among the first lines of the text: a Markdown
   heading, or a line of 3..15 words whose non-function words are mostly capitalised, which
   is not a page number, URL, e-mail, date, arXiv/DOI line or author list and does not end
   with a period. A title typeset over two or three lines is rejoined when a line ends with
   a function word, a colon or a hyphen, or the next line starts with a lowercase function
   word ("Levels of AGI: Operationalizing Progress on / the Path to AGI").
3. Otherwise the first sentence, cut to 12 words.
"""

from __future__ import annotations

import re

from propdex.checks.context import is_placeholder
from propdex.llm.offline_rules.text import (
    FUNCTION_WORDS,
    block_sentences,
    capitalised_share,
    flatten,
    words,
)

TITLE_SCAN_LINES = 80  # the title sits on the first page; later lines are body text
TITLE_SCAN_CHARS = 8000
FALLBACK_WORDS = 12
UNTITLED = "Untitled document"

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
NOT_TITLE = re.compile(
    r"https?://|www\.|\S@\S|\barxiv\s*:|\bdoi\s*[:.]|^\s*(?:page\s+)?\d+(?:\s*(?:of|/)\s*\d+)?\s*$"
    r"|^\s*\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\s*$|^\s*\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}\s*$"
    rf"|^\s*(?:\d{{1,2}}\s+)?{_MONTH}\s+(?:\d{{1,2}},?\s+)?\d{{4}}\s*$"
    r"|©|\bcopyright\b|\ball rights reserved\b|\bpreprint\b|\bunder review\b",
    re.IGNORECASE,
)
_JUNK_HINT = re.compile(
    r"^(?:untitled|title|document|none|null|unknown|slide\s*\d*|microsoft\s+\w+\s+-|"
    r"powerpoint presentation)\b|\.(?:pdf|docx?|tex|dvi|pptx?|txt|md|rtf|indd|qxd)\s*$",
    re.IGNORECASE,
)
_MARKDOWN_HEADING = re.compile(r"^\s*#{1,6}\s+(\S.*)$")
_AUTHOR_MARK = re.compile(r"[A-Za-z][0-9*†‡§¶]+(?:[,\s]|$)")  # "Morris1," "Vaswani∗"
_SECTION_NUMBER = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[IVX]+\.)\s+\S")
_FILING_FORM = re.compile(r"\bform\s+(10-K|10-Q|20-F|40-F|8-K|6-K|S-1|F-1)\b", re.IGNORECASE)
_REGISTRANT_LABEL = re.compile(r"^\(?\s*exact name of (?:the )?registrant", re.IGNORECASE)
_FILING_PERIOD = re.compile(
    r"for the (fiscal year|quarterly period) ended\s+([a-z]+\.?\s+\d{1,2},\s*\d{4})", re.IGNORECASE
)


def plausible_hint(hint: str | None) -> str | None:
    """The cleaned hint, or None when it does not look like a real title."""
    if not hint:
        return None
    clean = clean_title(hint)
    letters = sum(ch.isalpha() for ch in clean)
    if not 2 <= len(clean) <= 250 or letters < 0.5 * len(clean.replace(" ", "")):
        return None
    if _JUNK_HINT.search(clean) or NOT_TITLE.search(clean) or is_placeholder(clean):
        return None
    if not any(len(w) >= 3 and w.isalpha() for w in words(clean)):
        return None
    return clean


def clean_title(text: str) -> str:
    text = flatten(text).strip().lstrip("#").strip()
    text = text.strip("\"'“”‘’`*_ ")
    return text.rstrip(" .,;:-–—").strip()


def _is_title_line(line: str) -> bool:
    tokens = line.split()
    if not 3 <= len(tokens) <= 15 or line.endswith("."):
        return False
    if NOT_TITLE.search(line) or _SECTION_NUMBER.match(line):
        return False
    if line.count(",") >= 2 or _AUTHOR_MARK.search(line):
        return False  # author lists: "A. Name1, B. Name2, ..."
    return capitalised_share(line) >= 0.6


def _continues_title(line: str, next_line: str) -> bool:
    last = line.split()[-1].lower()
    first = next_line.split()[0]
    wants_more = last in FUNCTION_WORDS or line.endswith((":", "-", "–", "—"))
    lower_start = first.islower() and first.lower() in FUNCTION_WORDS
    if not (wants_more or lower_start):
        return False
    tokens = next_line.split()
    return (
        len(tokens) <= 10
        and not next_line.endswith(".")
        and not NOT_TITLE.search(next_line)
        and "," not in next_line
        and not _AUTHOR_MARK.search(next_line)
    )


def heading_title(text: str) -> str | None:
    lines = [flatten(raw) for raw in text[:TITLE_SCAN_CHARS].split("\n")]
    lines = [line for line in lines if line][:TITLE_SCAN_LINES]
    for index, line in enumerate(lines):
        markdown = _MARKDOWN_HEADING.match(line)
        if markdown:
            return clean_title(markdown.group(1)) or None
        if not _is_title_line(line):
            continue
        title = line
        for next_line in lines[index + 1 : index + 3]:
            if (
                not _continues_title(title, next_line)
                or len((title + " " + next_line).split()) > 25
            ):
                break
            title = f"{title} {next_line}"
        return clean_title(title) or None
    return None


def filing_title(text: str) -> str | None:
    head = text[:TITLE_SCAN_CHARS]
    form = _FILING_FORM.search(head[:1000])
    if form is None:
        return None
    lines = [line for line in (flatten(raw) for raw in head.split("\n")) if line]
    names = [lines[i - 1] for i in range(1, len(lines)) if _REGISTRANT_LABEL.match(lines[i])]
    registrant = names[0].strip() if names else ""  # kept whole: "Inc." keeps its period
    if not registrant or _FILING_FORM.search(registrant):
        return None
    title = f"{registrant} Form {form.group(1).upper()}"
    period = _FILING_PERIOD.search(flatten(head))
    if period:
        title += f", {period.group(1).lower()} ended {period.group(2).title()}"
    return title


def fallback_title(text: str) -> str:
    for sentence in block_sentences(text[:3000]):
        if NOT_TITLE.search(sentence) or not any(ch.isalpha() for ch in sentence):
            continue
        cut = " ".join(sentence.split()[:FALLBACK_WORDS])
        return clean_title(cut) or UNTITLED
    return UNTITLED


def make_title(text: str, hint: str | None) -> str:
    return plausible_hint(hint) or filing_title(text) or heading_title(text) or fallback_title(text)
