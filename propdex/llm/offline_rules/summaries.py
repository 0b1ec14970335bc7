"""Offline summary rules (``offline-summary-v4``): one sentence from the document's opening.

1. Only the first ``SUMMARY_SCAN_CHARS`` characters are read (pysbd is slow on long texts).
2. When an "Abstract" label starts a line, the text after it is used.
3. Otherwise front-matter lines are dropped first: the title's own lines, author lists,
   e-mails, URLs, affiliations, arXiv/DOI ids, dates, copyright notices, "Keywords:" lines,
   table-of-contents lines and page numbers.
   Only the leading lines are filtered: the first line of prose (6+ words with a verb)
   ends the front matter.
4. The first informative sentence wins: at least 6 words, starting with a capital (or with a
   word of the title, for lowercase names such as "propdex" or "iPhone") and not with a
   pronoun that points back ("It ...", "They ...", "This is ..."; "This report ..." is fine):
   alone, a summary cannot resolve it,
   a verb, mostly letters, not a
   notice (licence, permission, "work done while at ..."), not an instruction ("See ...",
   "Indicate ...", or any sentence opening with a base-form verb), without two or more
   check boxes or bullets (a form), not a run of capitalised names and not a Markdown table
   row (the layout reader writes a table of contents as a table).
5. "We"/"In this paper, we" become "The authors"; citations are removed; the sentence is cut
   to ~40 words at the last clause boundary (comma, semicolon, colon, dash) and ends with a
   period. If pysbd still sees two sentences, the first is kept.
"""

from __future__ import annotations

import re
import unicodedata

from propdex.llm.offline_rules.propositions import strip_citations
from propdex.llm.offline_rules.text import (
    BASE_VERBS,
    FUNCTION_WORDS,
    block_sentences,
    capitalised_share,
    ends_sentence,
    flatten,
    has_verb,
    is_heading_line,
    split_sentences,
    words,
)
from propdex.llm.offline_rules.titles import NOT_TITLE

SUMMARY_SCAN_CHARS = 6000
MAX_SUMMARY_WORDS = 40
MIN_CUT_WORDS = 12  # a clause boundary earlier than this would leave too little

_ABSTRACT_LABEL = re.compile(
    r"^[ \t#*]*(?:abstract|summary)[ \t*]*(?:[.:—–-][ \t]*|\n)", re.IGNORECASE | re.MULTILINE
)
_AFFILIATION = re.compile(
    r"\b(?:universit\w*|institut\w*|laborator\w*|lab|department|dept\.|school of|college|"
    r"inc\.|corp\.|corporation|ltd\.?|gmbh|google|deepmind|microsoft|meta|openai|research|"
    r"cent(?:er|re)|faculty|academy)\b",
    re.IGNORECASE,
)
_FRONT_MATTER = re.compile(
    r"^\s*(?:keywords?|index terms|contents|table of contents|acknowledge?ments?)\b"
    r"|\.{4,}\s*\d+\s*$|^\s*(?:abstract|summary)\s*$|^\s*\d+\s*$",
    re.IGNORECASE,
)
_NOTICE = re.compile(
    r"\bcopyright\b|©|\brights reserved\b|\bpermission\b|\blicen[cs]e[ds]?\b|\bpreprint\b|"
    r"\bunder review\b|\bcorrespond\w*\s+author|\bequal contribution|"
    r"\bwork (?:was )?(?:done|performed) while\b|\bsubmitted to\b|\baccepted (?:at|to|by)\b",
    re.IGNORECASE,
)
_AUTHORS_LEAD = [
    (
        re.compile(
            r"^(?:in|throughout) (?:this|the present) (?:paper|work|article|study|report),?\s+we\b",
            re.I,
        ),
        "The authors",
    ),
    (re.compile(r"^here,?\s+we\b", re.I), "The authors"),
    (re.compile(r"^we\b", re.I), "The authors"),
    (re.compile(r"^our\b", re.I), "The authors'"),
]
_CLAUSE_END = (",", ";", ":", "—", "–")
_INSTRUCTION_WORDS = frozenset("see indicate please click visit contact refer note".split())
_BACK_POINTING = frozenset("it its they their them he she his her".split())
_DEMONSTRATIVES = frozenset("this these those that".split())
_AUXILIARIES = frozenset("is was are were has have had can could will would may might does do did".split())


def _is_front_matter_line(line: str, title_words: set[str]) -> bool:
    tokens = words(line)
    if not tokens:
        return True
    if NOT_TITLE.search(line) or _FRONT_MATTER.search(line):
        return True
    lowered = {t.lower() for t in tokens}
    if title_words and lowered <= title_words:
        return True  # a line of the title itself
    short = len(tokens) <= 12
    if (
        short
        and not has_verb(line)
        and (_AFFILIATION.search(line) or capitalised_share(line) >= 0.8)
    ):
        return True  # affiliations, author names
    if line.count(",") >= 2 and capitalised_share(line) >= 0.8:
        return True  # author list
    return short and is_heading_line(line) and not ends_sentence(line)


def _body_text(prefix: str, title: str) -> str:
    """The text after an "Abstract" label, or else the prefix with its leading front-matter
    lines dropped (filtering stops at the first line of prose: 6+ words with a verb)."""
    label = _ABSTRACT_LABEL.search(prefix)
    if label:
        return prefix[label.end() :]
    title_words = {w.lower() for w in words(title)}
    kept: list[str] = []
    in_front_matter = True
    for line in (flatten(raw) for raw in prefix.split("\n")):
        if in_front_matter:
            if not line or _is_front_matter_line(line, title_words):
                continue
            in_front_matter = len(words(line)) < 6 or not has_verb(line)
        kept.append(line)
    return "\n".join(kept)


def is_informative(sentence: str, title: str = "") -> bool:
    tokens = words(sentence)
    if len(tokens) < 6 or sentence.startswith("|"):
        return False  # too short, or a Markdown table row (a contents line reads as one)
    named_in_title = tokens[0] in words(title)  # "propdex turns ..." under "What propdex does"
    if not (sentence[:1].isupper() or sentence[:1] in '"“' or named_in_title):
        return False
    first = tokens[0].lower()
    if first in BASE_VERBS or first in _INSTRUCTION_WORDS:
        return False  # "See the definitions ...", "Indicate by check mark ...": instructions
    if first in _BACK_POINTING or (first in _DEMONSTRATIVES and tokens[1].lower() in _AUXILIARIES):
        return False  # "It is orchestrated by ...", "This is ...": the antecedent is elsewhere
    if sum(unicodedata.category(ch) == "So" or ch in "•·" for ch in sentence) >= 2:
        return False  # check boxes and bullets: a form or a run of list items
    letters = sum(ch.isalpha() for ch in sentence)
    if letters < 0.7 * len(sentence.replace(" ", "")):
        return False
    if _NOTICE.search(sentence) or NOT_TITLE.search(sentence):
        return False
    return has_verb(sentence) and capitalised_share(sentence) < 0.7


def _third_person(sentence: str) -> str:
    for pattern, replacement in _AUTHORS_LEAD:
        if pattern.search(sentence):
            return pattern.sub(replacement, sentence, count=1)
    return sentence


def bound_sentence(sentence: str, max_words: int = MAX_SUMMARY_WORDS) -> str:
    """Cut to ``max_words`` at a clause boundary when possible; end with one period."""
    tokens = sentence.split()
    if len(tokens) > max_words:
        cut = max_words
        for index in range(max_words, MIN_CUT_WORDS - 1, -1):
            if tokens[index - 1].endswith(_CLAUSE_END) or tokens[index - 1] in ("—", "–"):
                cut = index
                break
        tokens = tokens[:cut]
        while len(tokens) > 1 and tokens[-1].lower().strip(",;:—–") in FUNCTION_WORDS:
            tokens.pop()
    text = " ".join(tokens).rstrip(" ,;:—–-")
    if not text.rstrip("\"')”’]").endswith((".", "!", "?")):
        text += "."
    return text


def make_summary(text: str, title: str) -> str:
    body = _body_text(text[:SUMMARY_SCAN_CHARS], title)
    chosen = next((s for s in block_sentences(body) if is_informative(s, title)), None)
    if chosen is None:
        return bound_sentence(f"A document titled '{title}'")
    sentence = bound_sentence(_third_person(strip_citations(chosen)))
    parts = split_sentences(sentence)
    return bound_sentence(parts[0]) if len(parts) > 1 else sentence
