"""LanceDB's default FTS analyzer and BM25 scoring, for an in-memory engine.

Measured on LanceDB 0.40.0 (lance-index / lance-tokenizer 13.0.0, frostem stemmer) with
`lancedb.tokenize()` over every Unicode code point and ~237k English words, and against `_score`
on real tables (tests/test_analyzer.py).

Analyzer of `lancedb.index.FTS()` with its defaults, in this order, for rows and queries alike:
1. Split: a token is a maximal run of chars for which Rust's `char::is_alphanumeric` holds
   (Unicode Alphabetic or Numeric); all else separates, `_`, `'`, `-`, `.` included:
   "don't" -> don t, "AGI's" -> agi s, "x-ray" -> x ray, "3.14" -> 3 14. A CJK run is one token.
   That set is Python's `str.isalnum()` plus _EXTRA_ALNUM (vowel signs such as Devanagari
   U+093F, circled letters, letters newer than this Python's Unicode).
2. Drop tokens of 40 or more UTF-8 bytes of the original text (39 bytes are kept).
3. Lowercase char by char (no final-sigma rule: "ΟΔΟΣ" -> "οδοσ").
4. Stem: Snowball English (Porter2). PyStemmer agreed on all 236,784 words tried.
5. Stop words, AFTER stemming: "does" -> "doe" stays, "ands" -> "and" goes. The list is NLTK's
   English list without its apostrophe forms (153 words), found by tokenizing every word.
6. ASCII folding, last (so "ïn" -> "in" is kept), char by char: NFKD, then ß->ss, æ->ae, ø->o,
   ł->l ..., keeping the ASCII chars only; a char with nothing ASCII left is kept as it is.
   é->e, ﬁ->fi, Ｈ->H, ½->12, ㈠->(); Greek, Cyrillic, CJK are unchanged.
Not matched: ~70 code points whose case mapping or decomposition is newer than Unicode 14
(Python 3.11's unicodedata); none occur in ordinary text.

BM25 (lance-index scorer.rs; Rust computes in float32, this module in float64, <1e-6 apart):
  idf(n) = ln(1 + (N - n + 0.5) / (n + 0.5))
  score(query, row) = sum over the query's terms of
      idf(n_t) * (K1 + 1) * tf / (tf + K1 * (1 - B + B * dl / avgdl)),   K1 = 1.2, B = 0.75
  N = rows with at least one term; n_t = rows containing term t; dl = the row's term count
  (duplicates kept); avgdl = all terms / N. Rows that analyze to nothing (NULL, "", only stop
  words or long tokens) are not counted at all. A term repeated in the query is summed once per
  occurrence ("apple apple pie" weighs apple twice).
  Rows added after create_index() and before optimize() are scored with two statistics: indexed
  rows keep the index's N, n_t, avgdl (the new rows ignored); the new rows are scanned and scored
  with N, n_t, avgdl over indexed plus new rows. After optimize() all rows share one statistics.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np
import Stemmer

BM25_K1 = 1.2
BM25_B = 0.75
MAX_TOKEN_BYTES = 40  # a token this long or longer (UTF-8 bytes) is dropped

STOP_WORDS = frozenset("""
a about above after again against ain all am an and any are aren as at be because been before
being below between both but by can couldn d did didn do does doesn doing don down during each
few for from further had hadn has hasn have haven having he her here hers herself him himself
his how i if in into is isn it its itself just ll m ma me mightn more most mustn my myself
needn no nor not now o of off on once only or other our ours ourselves out over own re s same
shan she should shouldn so some such t than that the their theirs them themselves then there
these they this those through to too under until up ve very was wasn we were weren what when
where which while who whom why will with won wouldn y you your yours yourself yourselves
""".split())

# Code points Rust's char::is_alphanumeric accepts and str.isalnum() does not, as hex ranges,
# measured by tokenizing all of Unicode with lancedb.tokenize.
_EXTRA_ALNUM = """
345 363-36f 5b0-5bd 5bf 5c1-5c2 5c4-5c5 5c7 610-61a 64b-657 659-65f 670 6d6-6dc 6e1-6e4 6e7-6e8
6ed 711 730-73f 7a6-7b0 816-817 81b-823 825-827 829-82c 88f 897 8d4-8df 8e3-8e9 8f0-903 93a-93b
93e-94c 94e-94f 955-957 962-963 981-983 9be-9c4 9c7-9c8 9cb-9cc 9d7 9e2-9e3 a01-a03 a3e-a42
a47-a48 a4b-a4c a51 a70-a71 a75 a81-a83 abe-ac5 ac7-ac9 acb-acc ae2-ae3 afa-afc b01-b03 b3e-b44
b47-b48 b4b-b4c b56-b57 b62-b63 b82 bbe-bc2 bc6-bc8 bca-bcc bd7 c00-c04 c3e-c44 c46-c48 c4a-c4c
c55-c56 c5c c62-c63 c81-c83 cbe-cc4 cc6-cc8 cca-ccc cd5-cd6 cdc ce2-ce3 cf3 d00-d03 d3e-d44
d46-d48 d4a-d4c d57 d62-d63 d81-d83 dcf-dd4 dd6 dd8-ddf df2-df3 e31 e34-e3a e4d eb1 eb4-eb9
ebb-ebc ecd f71-f83 f8d-f97 f99-fbc 102b-1036 1038 103b-103e 1056-1059 105e-1060 1062-1064
1067-106d 1071-1074 1082-108d 108f 109a-109d 1712-1713 1732-1733 1752-1753 1772-1773 17b6-17c8
1885-1886 18a9 1920-192b 1930-1938 1a17-1a1b 1a55-1a5e 1a61-1a74 1abf-1ac0 1acc-1ace 1b00-1b04
1b35-1b43 1b80-1b82 1ba1-1ba9 1bac-1bad 1be7-1bf1 1c24-1c36 1c89-1c8a 1dd3-1df4 24b6-24e9
2de0-2dff a674-a67b a69e-a69f a7cb-a7cf a7d2 a7d4 a7da-a7dc a7f1 a802 a80b a823-a827 a880-a881
a8b4-a8c3 a8c5 a8ff a926-a92a a947-a952 a980-a983 a9b4-a9bf a9e5 aa29-aa36 aa43 aa4c-aa4d
aa7b-aa7d aab0 aab2-aab4 aab7-aab8 aabe aaeb-aaef aaf5 abe3-abea fb1e 10376-1037a 105c0-105f3
10940-10959 10a01-10a03 10a05-10a06 10a0c-10a0f 10d24-10d27 10d40-10d65 10d69 10d6f-10d85
10eab-10eac 10ec2-10ec7 10efa-10efc 11000-11002 11038-11045 11073-11074 11080-11082 110b0-110b8
110c2 11100-11102 11127-11132 11145-11146 11180-11182 111b3-111bf 111ce-111cf 1122c-11234 11237
1123e-11241 112df-112e8 11300-11303 1133e-11344 11347-11348 1134b-1134c 11357 11362-11363
11380-11389 1138b 1138e 11390-113b5 113b7-113c0 113c2 113c5 113c7-113ca 113cc-113cd 113d1 113d3
11435-11441 11443-11445 114b0-114c1 115af-115b5 115b8-115be 115dc-115dd 11630-1163e 11640
116ab-116b5 116d0-116e3 1171d-1172a 1182c-11838 11930-11935 11937-11938 1193b-1193c 11940 11942
119d1-119d7 119da-119df 119e4 11a01-11a0a 11a35-11a39 11a3b-11a3e 11a51-11a5b 11a8a-11a97
11b60-11b67 11bc0-11be0 11bf0-11bf9 11c2f-11c36 11c38-11c3e 11c92-11ca7 11ca9-11cb6 11d31-11d36
11d3a 11d3c-11d3d 11d3f-11d41 11d43 11d47 11d8a-11d8e 11d90-11d91 11d93-11d96 11db0-11ddb
11de0-11de9 11ef3-11ef6 11f00-11f10 11f12-11f3a 11f3e-11f40 11f50-11f59 1342f 13441-13446
13460-143fa 16100-1612e 16130-16139 16d40-16d6c 16d70-16d79 16ea0-16eb8 16ebb-16ed3 16f4f
16f51-16f87 16f8f-16f92 16ff0-16ff6 187f8-187ff 18cff 18d09-18d1e 18d80-18df2 1b132 1b155 1bc9e
1ccf0-1ccf9 1d2c0-1d2d3 1df25-1df2a 1e000-1e006 1e008-1e018 1e01b-1e021 1e023-1e024 1e026-1e02a
1e030-1e06d 1e08f 1e4d0-1e4eb 1e4f0-1e4f9 1e5d0-1e5ed 1e5f0-1e5fa 1e6c0-1e6de 1e6e0-1e6f5
1e6fe-1e6ff 1e947 1f130-1f149 1f150-1f169 1f170-1f189 2b739-2b73f 2cea2-2cead 2ebf0-2ee5d
31350-33479
"""


def _char_class(spec: str, astral: bool) -> str:
    """Regex class body of the BMP ranges of `spec`, or of its astral ranges (>= U+10000)."""
    parts = []
    for item in spec.split():
        lo, _, hi = item.partition("-")
        if (int(lo, 16) >= 0x10000) == astral:
            parts.append(re.escape(chr(int(lo, 16))))
            if hi:
                parts.append("-" + re.escape(chr(int(hi, 16))))
    return "".join(parts)


# \w is isalnum() plus "_"; split_words turns "_" into a space first. A class of BMP chars only is
# compiled to a bitmap; astral ranges are tested one by one, so they get their own, rarely
# used pattern.
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9]+")
_BMP_TOKEN = re.compile(r"[\w" + _char_class(_EXTRA_ALNUM, astral=False) + "]+")
_TOKEN = re.compile(r"[\w" + _char_class(_EXTRA_ALNUM, astral=False)
                    + _char_class(_EXTRA_ALNUM, astral=True) + "]+")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


# Letters NFKD leaves alone but the folding maps (all others fold through NFKD).
_FOLD_SPECIAL = str.maketrans({
    "ß": "ss", "ẞ": "SS", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ð": "d", "Ð": "D",
    "đ": "d", "Đ": "D", "ø": "o", "Ø": "O", "þ": "th", "Þ": "TH", "ħ": "h", "Ħ": "H",
    "ı": "i", "ĸ": "k", "ł": "l", "Ł": "L", "ŋ": "n", "Ŋ": "N", "ŧ": "t", "Ŧ": "T",
})

_stemmer = Stemmer.Stemmer("english")


def _fold_char(ch: str) -> str:
    folded = unicodedata.normalize("NFKD", ch).translate(_FOLD_SPECIAL)
    return "".join(c for c in folded if c.isascii()) or ch


# Words whose terms are remembered (a few hundred bytes each). A resident index re-analyzes
# the same words all the time: every merge of its small segments tokenizes their texts again
# (a merge of 1,100 rows took 24-48 ms of CPU, four fifths of it stemming, while the searches
# waited for the GIL; 18-30 ms with this), and every search its query, once per table (the
# benchmark's 100 queries in one process, alternating: 4.73 -> 4.30 ms per search).
ANALYZED_WORDS = 1 << 17


@functools.lru_cache(maxsize=ANALYZED_WORDS)
def analyze_word(word: str) -> str | None:
    """One word of split_words -> its term (steps 2-6), or None when a filter drops it."""
    if len(word) >= MAX_TOKEN_BYTES or len(word.encode()) >= MAX_TOKEN_BYTES:
        return None
    # str.lower() turns a word-final Σ into ς; Rust lowercases char by char, giving σ.
    term = _stemmer.stemWord(word.replace("Σ", "σ").lower())
    if term in STOP_WORDS:
        return None
    if not term.isascii():
        term = "".join(c if c.isascii() else _fold_char(c) for c in term)
    return term


def split_words(text: str) -> list[str]:
    """The words of ``text`` before any filter (step 1)."""
    if text.isascii():
        return _ASCII_TOKEN.findall(text)
    text = text.replace("_", " ")
    return (_TOKEN if _ASTRAL.search(text) else _BMP_TOKEN).findall(text)


def analyze(text: str) -> list[str]:
    """The terms LanceDB's default FTS() gives `text`, in order, duplicates kept."""
    return [t for w in split_words(text) if (t := analyze_word(w)) is not None]


# LanceDB computes BM25 in float32, and so do these, in the order of operations of lance's
# scorer, on NumPy arrays or scalars. Scores still differ from LanceDB's in the last bit or
# two for about half the rows (lance 13 also buckets document lengths in places), so they
# equal LanceDB's to float32 precision (relative 1e-6), not bit for bit.
_K1 = np.float32(BM25_K1)
_B = np.float32(BM25_B)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)


def bm25_idf(doc_freq: np.ndarray | int, num_docs: int) -> np.ndarray:
    """LanceDB's idf: ln(1 + (N - n + 0.5) / (n + 0.5)); never negative."""
    n = np.asarray(doc_freq, dtype=np.float32)
    return np.log((np.float32(num_docs) - n + _HALF) / (n + _HALF) + _ONE)


def bm25_length_norm(doc_len: np.ndarray | float, avg_doc_len: float) -> np.ndarray:
    """K1 * (1 - b + b * length / average length): the part of a row's score that depends
    on the row alone, fixed while the corpus statistics are (a view computes it once)."""
    return _K1 * (_ONE - _B + _B * np.asarray(doc_len, dtype=np.float32)
                  / np.float32(avg_doc_len))


def bm25_saturated(idf: np.ndarray | float, tf: np.ndarray | float,
                   length_norm: np.ndarray | float) -> np.ndarray:
    """One query term's share of a row's score from the row's ``bm25_length_norm``;
    LanceDB keeps the (K1 + 1) factor."""
    tf = np.asarray(tf, dtype=np.float32)
    return np.asarray(idf, dtype=np.float32) * (_K1 + _ONE) * tf / (tf + length_norm)

