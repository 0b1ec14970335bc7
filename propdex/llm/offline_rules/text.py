"""Text primitives shared by the offline rule sets.

- ``text_blocks`` undoes PDF hard line breaks: lines of one paragraph are joined, while
  blank lines, Markdown headings, list items and short heading-like lines start new blocks
  (so a heading never glues itself onto the sentence after it).
- ``split_sentences`` runs pysbd over blocks joined by newlines (pysbd treats a newline as
  a boundary). pysbd's ``Segmenter`` keeps per-call state on the instance, so each thread
  gets its own. pysbd costs ~4 ms per 800 characters, most of the offline budget.
- The verb test (``is_verb_at``) is a compact lexicon read in context, not a tagger:
  * auxiliaries, modals and irregular past forms ("was", "can", "found") are verbs;
  * a base form from a list of ~250 common verbs ("use", "propose") is a verb after a
    pronoun, "to", a modal/"do", a relative pronoun, an adverb, a plural-looking word
    ("LLMs use") or, in lowercase, a capitalised word that does not start the sentence
    ("... of 'Levels of AGI' propose"), and a noun otherwise ("the original use");
  * a word ending in -ed is a verb unless a determiner or preposition precedes it ("the
    proposed method") or it is capitalised inside the sentence ("Related Work");
  * a lowercase word ending in -s/-es ("leans", "introduces") is a verb unless the word
    before it is a determiner, preposition, conjunction, number, -ing or -ly word, which
    keeps most plural nouns out ("the models", "of capabilities", "including models").
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Collection

import pysbd

AUXILIARIES = frozenset(
    "is are was were be been being am has have had do does did can could will would shall "
    "should may might must isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't "
    "didn't can't cannot couldn't won't wouldn't shouldn't mustn't".split()
)

_IRREGULAR_FORMS = (
    "said made went gone took taken saw seen knew known got gotten gave given found thought "
    "told became showed shown left felt brought began begun kept held wrote written stood "
    "heard meant met ran paid led grew grown lost fell fallen sent built understood drew "
    "drawn broke broken spent rose risen drove driven bought wore worn chose chosen sought "
    "threw thrown caught dealt won done did sold taught fought struck arose arisen forgot "
    "forgotten hid hidden laid sat spoke spoken woke ate eaten borne fled flew flown forbade "
    "froze frozen shook shaken slid stole stolen stuck swore swept swung tore torn undertook "
    "undertaken withdrew withdrawn"
).split()

# Base forms of common verbs (general English plus the vocabulary of papers and reports).
_VERB_BASES = (
    "say make go take see know get give find think tell become show leave feel put bring "
    "begin keep hold write stand hear let mean set meet run pay sit speak lie lead read grow "
    "lose fall send build understand draw break spend cut rise drive buy wear choose seek "
    "throw catch deal win sell teach fight use include provide require propose describe "
    "introduce define allow enable consider represent contain remain appear seem occur exist "
    "increase decrease reduce compare measure evaluate achieve improve support produce perform "
    "apply involve depend focus argue suggest indicate assert believe predict report present "
    "demonstrate outperform offer create develop design consist operate serve help need want "
    "try call ask work play move live follow change open close turn start stop add form "
    "base train test learn study analyze analyse examine explore address discuss identify "
    "determine estimate calculate assess obtain receive generate extend combine adopt "
    "attempt capture claim conclude construct contribute correspond derive detect emerge "
    "enhance ensure establish explain express fail feature handle highlight illustrate imply "
    "limit maintain manage match model motivate note observe outline own prevent process "
    "prove publish reach recognize recognise reflect refer relate rely remove replace "
    "resolve result return reveal select share solve specify state store surpass tend track "
    "transform vary view yield acquire affect aim announce answer approach benefit cause "
    "compete complete comprise confirm continue cover decline distinguish earn employ "
    "encompass enter expect face favor favour fit hope lack lean leave look manufacture "
    "market mark notice plan possess pursue raise rank record regard remain seem serve "
    "settle spread struggle suffer supply surround target tend total treat undergo value "
    "write evolve export import displace exceed pass carry issue charge ship arrive agree "
    "accept act belong come cost count decide deliver happen last like love miss pick prefer "
    "pull push remember stay suppose talk travel wait walk watch wish avoid check drop enjoy "
    "fill finish force gain invest join link mention order permit place point prepare print "
    "promise protect refuse release repeat reply request respond retain save search shift "
    "sign succeed survive switch trade trust worry hire fund own borrow lend owe grant "
    "invite rely restrict apply achieve attract compute encode decode predict infer"
).split()


IRREGULAR_VERBS = frozenset(_IRREGULAR_FORMS) - frozenset(_VERB_BASES)
BASE_VERBS = frozenset(_VERB_BASES)
# Words after which a base form is a verb: "we use", "to use", "can use", "that use".
_BASE_VERB_CONTEXT = frozenset(
    "i you we they these those that which who to not also often usually then only still just "
    "never always "
    "can could will would shall should may might must do does did don't doesn't didn't "
    "cannot can't won't wouldn't shouldn't couldn't".split()
)

# Words ending in -ed that are not verb forms.
_NOT_VERBS_ED = frozenset(
    "speed breed hundred indeed sacred naked wicked kindred rugged ragged bed red shed seed "
    "feed need reed weed creed greed deed steed".split()
)

DETERMINERS = frozenset(
    "a an the this these that those each every some any no all both either neither my your "
    "his her its our their many several few more most such another other".split()
)
PREPOSITIONS = frozenset(
    "of in on at by for with from to into onto over under about between among through "
    "during before after against without within across along around toward towards upon via "
    "per than as like beyond behind below above".split()
)
CONJUNCTIONS = frozenset("and or but nor so yet".split())
NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten".split())
PRONOUNS = frozenset(
    "i you he she it we they me him her us them his its our their mine yours hers ours "
    "theirs this these those that".split()
)
FUNCTION_WORDS = DETERMINERS | PREPOSITIONS | CONJUNCTIONS
STOPWORDS = (
    FUNCTION_WORDS
    | PRONOUNS
    | AUXILIARIES
    | frozenset(
        "not also very only just then there here which who whom whose what when where why how "
        "if because while whereas although though since unless until whether s etc e.g i.e "
        "now even still thus hence however".split()
    )
)

# Numbers (with decimals) or words made of letters/digits with inner apostrophes/hyphens.
_WORD = re.compile(r"\d+(?:[.,]\d+)+|[^\W_](?:[\w'’-]*[^\W_])?")
_WEAK_S_EXCLUDED_ENDINGS = ("ss", "us", "is", "ous", "ics", "ness", "'s", "’s")
_NOT_VERBS_S = frozenset(
    "https always perhaps sometimes towards afterwards whereas besides nevertheless series "
    "species news".split()
)


def words(text: str) -> list[str]:
    """Word tokens (numbers keep their decimal point)."""
    return _WORD.findall(text)


def _normal(token: str) -> str:
    return token.lower().replace("’", "'")


def _looks_plural(token: str) -> bool:
    low = _normal(token)
    return (
        len(low) >= 3
        and low.endswith("s")
        and not low.endswith(("ss", "us", "is", "'s"))
        and low not in STOPWORDS
    )


def is_weak_verb(tokens: list[str], index: int) -> bool:
    """A lowercase -s/-es word whose left neighbour could end a subject."""
    token = tokens[index]
    if index == 0 or len(token) < 4 or not token.islower() or not token.isalpha():
        return False
    if not token.endswith("s") or token.endswith(_WEAK_S_EXCLUDED_ENDINGS) or token in _NOT_VERBS_S:
        return False
    prev = _normal(tokens[index - 1])
    if prev.endswith(("ing", "ly")):
        return False  # "including models", "newly trained models"
    if prev in ("this", "that"):
        return True  # singular demonstratives never precede a plural noun: "this means"
    return not (prev in FUNCTION_WORDS or prev in NUMBER_WORDS or prev[:1].isdigit())


def is_verb_at(tokens: list[str], index: int) -> bool:
    """Whether ``tokens[index]`` reads as a finite verb (see the module docstring)."""
    low = _normal(tokens[index])
    prev = _normal(tokens[index - 1]) if index else ""
    if low in AUXILIARIES or low in IRREGULAR_VERBS:
        return True
    if low in BASE_VERBS:
        if index == 0:
            return False
        if prev in _BASE_VERB_CONTEXT or prev.endswith("ly") or _looks_plural(tokens[index - 1]):
            return True
        # "the authors of 'Levels of AGI' propose": a lowercase base form after a name.
        return tokens[index].islower() and tokens[index - 1][:1].isupper() and index > 1
    # Four letters are enough ("used", "owed"); _NOT_VERBS_ED holds "seed", "need" and kin.
    if len(low) >= 4 and low.endswith("ed") and low.isalpha() and low not in _NOT_VERBS_ED:
        if index and not tokens[index].islower():
            return False  # "Related Challenges": a capitalised word inside a heading
        return prev not in DETERMINERS and prev not in PREPOSITIONS
    return is_weak_verb(tokens, index)


def verb_positions(tokens: list[str]) -> list[int]:
    return [i for i in range(len(tokens)) if is_verb_at(tokens, i)]


def has_strong_verb(text: str) -> bool:
    """A verb that is no -s/-es or base form: an auxiliary, an irregular or an -ed form."""
    tokens = words(text)
    return any(
        (i == 0 or tokens[i].islower())  # "Attention Is All You Need": title case
        and (
            _normal(tokens[i]) in AUXILIARIES
            or _normal(tokens[i]) in IRREGULAR_VERBS
            or _normal(tokens[i]).endswith("ed")
        )
        for i in verb_positions(tokens)
    )


def has_verb(text: str) -> bool:
    tokens = words(text)
    return any(is_verb_at(tokens, i) for i in range(len(tokens)))


def flatten(text: str) -> str:
    """One line with single spaces."""
    return " ".join(text.split())


def capitalise_first(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def ends_sentence(line: str) -> bool:
    core = line.rstrip("\"'”’)]*")
    return core.endswith((".", "!", "?", ":"))


_MARKDOWN_HEADING = re.compile(r"^#{1,6}\s+\S")
_LIST_ITEM = re.compile(r"^(?:[-*•●▪◦‣]|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+\S")
_SECTION_NUMBER = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[IVX]+\.|[A-Z]\.)\s+")


def capitalised_share(line: str) -> float:
    """Share of non-function words that start with a capital letter (numbers ignored)."""
    tokens = [t for t in words(line) if not t[0].isdigit() and t.lower() not in FUNCTION_WORDS]
    if not tokens:
        return 0.0
    return sum(t[0].isupper() for t in tokens) / len(tokens)


def is_heading_line(line: str) -> bool:
    """A short line with no closing punctuation whose words are mostly capitalised."""
    if _MARKDOWN_HEADING.match(line):
        return True
    tokens = line.split()
    if not 1 <= len(tokens) <= 12 or line.rstrip("\"'”’)]").endswith(
        (".", ",", ";", ":", "!", "?")
    ):
        return False
    if not (line[0].isupper() or line[0].isdigit()):
        return False
    return capitalised_share(_SECTION_NUMBER.sub("", line)) >= 0.6


SHORT_LINE_SHARE = 0.6  # a line under 60% of the typical line length ends its block


def _typical_length(lines: list[str]) -> float:
    """75th percentile of the line lengths: the width of a full line of prose."""
    lengths = sorted(len(line) for line in lines if line)
    if len(lengths) < 3:
        return 0.0  # too few lines to tell: every line counts as full
    return float(lengths[(len(lengths) * 3) // 4])


def _continues_onto_next_line(line: str) -> bool:
    last = line.split()[-1].lower() if line else ""
    return line.endswith((",", "-", "–", "(")) or last in FUNCTION_WORDS


# "1 There is controversy ...": a footnote that the PDF text puts inside the page's prose.
_FOOTNOTE_START = re.compile(r"^\d{1,2}\s+(?=[A-Z][a-z])")
# A Markdown block quote (the layout reader writes a footnote as one: "> 4 To illustrate"),
# and the footnote's mark after it: a number or a symbol before the footnote's first word.
_BLOCK_QUOTE = re.compile(r"^(?:>\s*)+")
# A Markdown table row, one line per row (the layout reader's tables).
_TABLE_ROW = re.compile(r"^\|.*\|$")
_QUOTED_FOOTNOTE_MARK = re.compile(r"^(?:\d{1,3}\s+(?=[A-Z“\"‘'(])|[*∗†‡§¶]+\s*)")
_PAGE_NUMBER_LINE = re.compile(r"^(?:page\s+)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?$", re.IGNORECASE)


def text_blocks(text: str, skip_lines: Collection[str] = ()) -> list[str]:
    """Paragraphs, headings and list items of ``text``, each on one line.

    A line joins the block above unless: a blank line precedes it; it is a Markdown
    heading, list item or table row, or follows a table row (a row is a block of its own,
    however long: rows glued together would read as one sentence); it opens a Markdown
    block quote (its "> " marker and a footnote's mark after it are dropped: "> 4 To
    illustrate" reads "To illustrate"); the line above
    is short (a heading, a front-matter line or a paragraph's last line) and does not end
    in a comma, hyphen or function word; it starts
    with a footnote number ("1 There is ...") where the line above is unfinished; the line
    above ends with a colon and this one starts in uppercase; or it is itself a short
    heading-like line. A first line that starts in lowercase or with punctuation never
    counts as short: the chunker cut it. Page-number lines and lines equal to one of
    ``skip_lines`` (case-insensitive; e.g. a running header) are left out without ending
    the block, so a sentence broken by a page break is joined again; for the same reason a
    blank line does not end a block whose last line ends no sentence when the next line
    starts in lowercase.
    """
    skipped = {flatten(line).lower() for line in skip_lines if line.strip()}
    lines = [flatten(raw) for raw in unicodedata.normalize("NFKC", text).split("\n")]
    lines = [
        line for line in lines if not _PAGE_NUMBER_LINE.match(line) and line.lower() not in skipped
    ]
    short_limit = SHORT_LINE_SHARE * _typical_length(lines)
    blocks: list[str] = []
    current: list[str] = []
    previous = ""  # the line above; "" at the start and after a blank line
    previous_short = False
    previous_quoted = False
    previous_row = False  # the line above is a Markdown table row
    blank_after_block = False  # a blank line followed the current block
    for line in lines:
        quote = _BLOCK_QUOTE.match(line)
        opens_quote = bool(quote) and not previous_quoted
        previous_quoted = bool(quote)
        if quote:
            line = line[quote.end():]
            if opens_quote:
                line = _QUOTED_FOOTNOTE_MARK.sub("", line)
        if not line:
            blank_after_block = blank_after_block or bool(current)
            previous, previous_short = "", False
            continue
        if blank_after_block:
            blank_after_block = False
            if not ends_sentence(current[-1]) and line[:1].islower():
                # A page break (a blank line, often with the page number and running
                # header around it) in the middle of a sentence: the sentence goes on.
                previous, previous_short = current[-1], False
            else:
                blocks.append(_join_lines(current))
                current = []
        # A first line that starts mid-sentence was cut by the chunker: its length says nothing.
        cut_first = not (current or blocks) and not line[:1].isupper() and not line[:1].isdigit()
        short = not cut_first and len(line) < short_limit
        footnote = bool(previous) and not ends_sentence(previous) and _FOOTNOTE_START.match(line)
        if footnote:
            line = _FOOTNOTE_START.sub("", line)
        row = _TABLE_ROW.match(line) is not None
        new_block = (
            not previous
            or row
            or previous_row
            or opens_quote
            or footnote
            or _MARKDOWN_HEADING.match(line) is not None
            or _LIST_ITEM.match(line) is not None
            or (previous_short and not _continues_onto_next_line(previous))
            or (previous.endswith(":") and line[:1].isupper())
            or (short and is_heading_line(line) and not _continues_onto_next_line(previous))
        )
        if new_block and current:
            blocks.append(_join_lines(current))
            current = []
        current.append(line.lstrip("#").strip() if _MARKDOWN_HEADING.match(line) else line)
        previous, previous_short, previous_row = line, short, row
    if current:
        blocks.append(_join_lines(current))
    return blocks


def _join_lines(lines: list[str]) -> str:
    joined = lines[0]
    for line in lines[1:]:
        if joined.endswith("-") and joined[-2:-1].isalpha() and line[:1].islower():
            # A word hyphenated at a line break: keep the hyphen, drop the break.
            joined += line
        else:
            joined += " " + line
    return joined


_thread_state = threading.local()


def _segmenter() -> pysbd.Segmenter:
    segmenter = getattr(_thread_state, "segmenter", None)
    if segmenter is None:
        segmenter = pysbd.Segmenter(language="en", clean=False, char_span=False)
        _thread_state.segmenter = segmenter
    return segmenter


# pysbd never splits inside double quotes, so a quoted passage of several sentences comes
# back whole; the quote marks are masked with private-use characters while segmenting.
_QUOTE_MASK = str.maketrans({'"': "\ue000", "“": "\ue001", "”": "\ue002"})
_QUOTE_UNMASK = str.maketrans({"\ue000": '"', "\ue001": "“", "\ue002": "”"})


def split_sentences(text: str) -> list[str]:
    """Sentences of already block-joined text (newlines are boundaries), stripped."""
    if not text.strip():
        return []
    # ``processor(...).process()`` is what ``segment`` runs before mapping each sentence back
    # onto the input with one freshly compiled regex per sentence; that mapping only restores
    # whitespace (flattened here anyway), costs a third of the time and floods re's cache.
    parts = _segmenter().processor(text.translate(_QUOTE_MASK)).process()
    return [s for s in (flatten(part).translate(_QUOTE_UNMASK) for part in parts) if s]


def block_sentences(text: str, skip_lines: Collection[str] = ()) -> list[str]:
    """Sentences of raw (PDF or plain) text, hard line breaks undone first."""
    return split_sentences("\n".join(text_blocks(text, skip_lines)))
