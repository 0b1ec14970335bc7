"""Offline proposition rules (``offline-propositions-v4``).

1. Sentences: hard line breaks are undone (``text.text_blocks``, which also drops running
   headers equal to the title and page numbers, and a block quote's "> " marker and
   footnote mark) and pysbd segments the chunk. Numeric
   citations ("[12]", "[3, 4]") and author-year citations ("(Turing, 1950)", "(Smith et
   al., 2023a; ...)") are removed, unbalanced quote marks are dropped and a "Figure 2:" /
   "Table 1." label is cut from a caption that goes on with a sentence.
2. Fragments are dropped: a sentence starting in lowercase or with "3)" (the tail of a
   sentence cut by the chunker or a page break), the chunk's last sentence when it has no
   closing punctuation and any sentence ending on a function word (cut the other way), a
   "Keywords:" line, a link with under 6 other words, anything under 4 words, without a
   verb, with under 60% letters, with over 60% capitalised words and no auxiliary,
   irregular or -ed verb (headings, name lists, table rows) or that looks like a
   reference-list entry (a year together with "Surname, I.", a DOI/arXiv/URL,
   "Proceedings"/"pp."/"vol.", a leading "[n]", a "2023b" year or "Accessed ...").
3. Coordinated independent clauses are split (``clauses``).
4. Leading pronouns and author pronouns are replaced (``pronouns``).
5. Output: single spaces, first letter capitalised, closing period added; duplicates
   dropped; at most ``max_count``; a proposition longer than ``max_chars`` is cut at its
   last clause boundary (keeping at least 40%) or dropped. A piece of a sentence cut by
   the chunk's edges (4+ words and a verb) is kept in text order as found, without a
   capital or period added (grading marks it down as partial): its facts are in no other
   proposition. Like the LLM prompt's "an empty list if the content states no facts", a
   chunk without statements (a reference list, a list of numbers) yields fewer than
   ``min_count``, possibly none.
6. Markdown tables are left out of the sentences; each of their rows is stated by the
   rules of ``tables`` (table, row and column named), after the sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from propdex.llm.offline_rules.clauses import MIN_WORDS, split_clauses
from propdex.llm.offline_rules.pronouns import SubjectTracker
from propdex.llm.offline_rules.tables import table_row_propositions, without_tables
from propdex.llm.offline_rules.text import (
    FUNCTION_WORDS,
    block_sentences,
    capitalise_first,
    capitalised_share,
    ends_sentence,
    flatten,
    has_strong_verb,
    is_verb_at,
    words,
)


@dataclass(frozen=True)
class PropositionLimits:
    min_count: int
    max_count: int
    max_chars: int


MIN_LETTER_SHARE = 0.6
MIN_KEPT_SHARE = 0.4  # a cut proposition keeps at least this share of max_chars

_NUMERIC_CITATION = re.compile(r"\s?\[\d+(?:\s*[,–-]\s*\d+)*\]")
_PAREN_WITH_YEAR = re.compile(r"\s?\([^()]{0,200}?\b(?:19|20)\d{2}[a-z]?\)")
_AUTHOR_YEAR = re.compile(r"et al|^\s?\(\s*[A-Z][\w’'\-. ]*(?:,|&| and )")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_FOOTNOTE_AFTER_PAREN = re.compile(r"(?<=\))\d{1,2}\b")
_CAPTION_LABEL = re.compile(
    r"^(?:figure|fig\.|table|tab\.|listing|algorithm|chart|exhibit)"
    r"\s*[A-Z]?\d+[a-z]?\s*[.:|—–-]?\s*",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\b(?:19|20)\d{2}[a-z]?\b")
_REFERENCE_MARK = re.compile(
    r"\b[A-Z][a-zA-Z’'\-]+,\s(?:[A-Z]\.\s?){1,3}|\bdoi\b|\barxiv\s*:?\s*\d|https?://|www\.|"
    r"\bproceedings\b|\bin proc\.|\bpp\.\s*\d|\bvol\.\s*\d|\bjournal of\b|\bconference on\b",
    re.IGNORECASE,
)
_LEADING_REF_NUMBER = re.compile(r"^\[\d+\]")
# "(Smith, 2023b)" style years and "Accessed October 12, 2023." only occur in references.
_REFERENCE_ONLY_MARK = re.compile(r"\b(?:19|20)\d{2}[a-z]\b|^(?:accessed|retrieved|url)\b", re.I)
_CLOSING_START = re.compile(r"^\w{0,3}[)\]]")  # "3) that balances ...": cut after "(Figure"
_URL = re.compile(r"\b(?:https?://|www\.)\S+")
URL_CONTEXT_WORDS = 6  # a sentence with a link needs this many other words to be a statement
_FRONT_MATTER_LABEL = re.compile(
    r"^(?:keywords?|key words|index terms|ccs concepts|acm reference format)\b", re.I
)

_QUOTE_PAIRS = (('"', '"'), ("“", "”"))

# Above this share of capitalised words and without an auxiliary, irregular or -ed verb
# ("was built"), a "sentence" is a heading, a name list or a table row.
MAX_CAPITALISED_SHARE = 0.6


def strip_citations(text: str) -> str:
    text = _NUMERIC_CITATION.sub("", text)
    text = _PAREN_WITH_YEAR.sub(lambda m: "" if _AUTHOR_YEAR.search(m.group()) else m.group(), text)
    text = _FOOTNOTE_AFTER_PAREN.sub("", text)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text).strip()


def drop_unbalanced_quotes(text: str) -> str:
    for opening, closing in _QUOTE_PAIRS:
        if opening == closing:
            if text.count(opening) % 2:
                text = text.replace(opening, "")
        elif text.count(opening) != text.count(closing):
            text = text.replace(opening, "").replace(closing, "")
    return text


def is_reference_entry(sentence: str) -> bool:
    if _LEADING_REF_NUMBER.match(sentence) or _REFERENCE_ONLY_MARK.search(sentence):
        return True
    return bool(_YEAR.search(sentence) and _REFERENCE_MARK.search(sentence))


def letter_share(text: str) -> float:
    dense = text.replace(" ", "")
    return sum(map(str.isalpha, dense)) / len(dense) if dense else 0.0


def clean_sentence(sentence: str) -> str:
    sentence = strip_citations(flatten(sentence))
    sentence = drop_unbalanced_quotes(sentence)
    caption = _CAPTION_LABEL.match(sentence)
    if caption:
        sentence = sentence[caption.end() :]
    return sentence.lstrip("•●▪◦‣-–—*;:,.)] ").strip()


CUT_AT_EDGE = "cut by the chunk's edges or a page break"


def statement_problem(sentence: str) -> str | None:
    """Why ``sentence`` states nothing (no backfilling can use it), or None."""
    if not sentence:
        return "empty"
    if _URL.search(sentence) and len(words(_URL.sub("", sentence))) < URL_CONTEXT_WORDS:
        return "a link"
    if _FRONT_MATTER_LABEL.match(sentence):
        return "front matter"
    if is_reference_entry(sentence):
        return "reference entry"
    tokens = words(sentence)
    if len(tokens) < MIN_WORDS:
        return "too short"
    if letter_share(sentence) < MIN_LETTER_SHARE:
        return "mostly digits or symbols"
    if not any(is_verb_at(tokens, i) for i in range(len(tokens))):
        return "no verb"
    return None


def fragment_reason(sentence: str, *, last: bool) -> str | None:
    """Why ``sentence`` is not a proposition, or None when it is one."""
    problem = statement_problem(sentence)
    if problem:
        return problem
    if sentence[0].islower() or _CLOSING_START.match(sentence):
        return CUT_AT_EDGE
    if not ends_sentence(sentence) and (last or words(sentence)[-1].lower() in FUNCTION_WORDS):
        return CUT_AT_EDGE
    if capitalised_share(sentence) > MAX_CAPITALISED_SHARE and not has_strong_verb(sentence):
        return "heading, name list or table row"
    return None


def finish(text: str, max_chars: int, *, close: bool = True) -> str | None:
    """Single-spaced, capitalised, closed with a period and within ``max_chars``;
    ``close=False`` keeps the sentence's own first letter and ending."""
    text = drop_unbalanced_quotes(flatten(text))
    if close:
        text = capitalise_first(text.rstrip(" ,;:—–-"))
    if not text:
        return None
    if len(text) > max_chars:
        cut = max(text.rfind(", ", 0, max_chars), text.rfind("; ", 0, max_chars))
        if cut < MIN_KEPT_SHARE * max_chars:
            return None
        text = text[:cut]
    if close and not text.rstrip("\"')”’]").endswith((".", "!", "?")):
        text += "."
    return text if len(text) <= max_chars else None


def make_propositions(chunk_text: str, title: str, limits: PropositionLimits) -> list[str]:
    # A line repeating the title is a running page header, not part of the sentence it splits.
    sentences = [clean_sentence(s)
                 for s in block_sentences(without_tables(chunk_text), skip_lines={title})]
    tracker = SubjectTracker(title)
    propositions: list[str] = []
    last = len(sentences) - 1
    for index, sentence in enumerate(sentences):
        reason = fragment_reason(sentence, last=index == last)
        if reason == CUT_AT_EDGE:
            # The piece of a sentence the chunk's edge cut: the LLM prompt also sees only the
            # chunk, and dropping the piece would leave its facts out of the index (the
            # chunker cuts inside a sentence at about every other chunk). Kept as found, so
            # grading sees it is partial; a head piece still gets its pronoun resolved.
            piece = tracker.resolve(sentence) if sentence[:1].isupper() else sentence
            clauses = [finish(piece, limits.max_chars, close=False)]
        elif reason is None:
            clauses = [finish(tracker.resolve(clause), limits.max_chars)
                       for clause in split_clauses(sentence)]
        else:
            continue
        for proposition in clauses:
            if proposition and proposition not in propositions:
                propositions.append(proposition)
        if len(propositions) >= limits.max_count:
            break
    for statement in table_row_propositions(chunk_text, title):
        proposition = finish(statement, limits.max_chars)
        if proposition and proposition not in propositions:
            propositions.append(proposition)
    return propositions[: limits.max_count]
