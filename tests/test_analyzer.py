"""propdex.resident.analyzer against LanceDB itself: its FTS tokens and its BM25 `_score`."""

from __future__ import annotations

import random
from collections import Counter

import lancedb
import pyarrow as pa
import pytest

from propdex.resident.analyzer import analyze, bm25_idf, bm25_length_norm, bm25_saturated
from propdex.resident.text import TextPostings

TRICKY = [
    "The quick brown foxes don't jump over AGI's lazy dogs",
    "Straße café naïve Æsir Øre ﬁnance ＡＢＣ１２３ Ⓐⓑ ½",
    "snake_case x-ray 3.14 e-mail v2.0 COVID-19",
    "東京タワー привет ΟΔΟΣ İstanbul हिन्दी مرحبا",
    "does only ands its ïn running runs ran",
    "a" * 39 + " " + "b" * 40 + " " + "é" * 19 + " " + "é" * 20,
    "",
    "the and of it is",
]
STOP_WORDS = ["the", "and", "it", "its", "don", "t", "s", "having", "ands", "yourself"]
KEPT_WORDS = ["does", "only", "very", "because", "ourselves", "\u00efn"]  # ïn folds to "in"


def _table(tmp_path, texts: list[str | None], name: str = "t"):
    db = lancedb.connect(str(tmp_path.absolute()))
    data = pa.table({"id": list(range(len(texts))), "text": pa.array(texts, pa.string())})
    table = db.create_table(name, data)
    table.create_index("text", config=lancedb.index.FTS(), replace=True)
    return table


def _search(table, query: str) -> dict[int, float]:
    result = (
        table.search(lancedb.query.MatchQuery(query, "text"), query_type="fts")
        .select(["id", "_score"])
        .limit(10_000)
        .to_arrow()
    )
    return dict(zip(result["id"].to_pylist(), result["_score"].to_pylist(), strict=True))


def _bm25(query: str, rows: dict[int, str | None], stats: list[str | None]) -> dict[int, float]:
    """Scores of `rows` for `query`, with N / df / avgdl taken from the rows `stats`."""
    docs = [terms for terms in map(analyze, [t or "" for t in stats]) if terms]
    num_docs = len(docs)
    avg_len = sum(map(len, docs)) / num_docs
    doc_freq = Counter(term for terms in docs for term in set(terms))
    scores = {}
    for row_id, text in rows.items():
        terms = analyze(text or "")
        tf = Counter(terms)
        score = sum(
            bm25_saturated(bm25_idf(doc_freq[q], num_docs), tf[q],
                           bm25_length_norm(len(terms), avg_len))
            for q in analyze(query)
            if tf[q]
        )
        if score > 0:
            scores[row_id] = score
    return scores


def _assert_scores_equal(expected: dict[int, float], actual: dict[int, float]) -> None:
    assert sorted(expected) == sorted(actual)
    for row_id, score in actual.items():
        assert expected[row_id] == pytest.approx(score, rel=1e-4)


@pytest.mark.parametrize("text", TRICKY)
def test_tokens_equal_lancedb_tokenize(text):
    assert [t.text for t in lancedb.tokenize(text)] == analyze(text)


def test_postings_hold_the_terms_of_analyze():
    postings = TextPostings(TRICKY)
    expected = [Counter(analyze(t)) for t in TRICKY]
    actual = [Counter() for _ in TRICKY]
    for term in {term for terms in expected for term in terms}:
        for row, frequency in zip(*postings.postings(term), strict=True):
            actual[row][term] = int(frequency)
    assert (expected, [sum(c.values()) for c in expected]) == (
        actual, postings.lengths.astype(int).tolist())


def test_each_word_finds_exactly_the_rows_holding_its_term(tmp_path):
    table = _table(tmp_path, TRICKY)
    row_terms = [set(analyze(t)) for t in TRICKY]
    # A query is analyzed too, so query with the source word (a term such as "onli" would be
    # stemmed again).
    words = {w for text in TRICKY for w in text.split() if len(analyze(w)) == 1}
    assert len(words) > 25
    for word in words:
        (term,) = analyze(word)
        expected = {i for i, terms in enumerate(row_terms) if term in terms}
        assert (word, expected) == (word, set(_search(table, word)))


@pytest.mark.parametrize("word", STOP_WORDS)
def test_stop_word_finds_nothing(tmp_path, word):
    table = _table(tmp_path, [f"{word} apple", "apple pie"])
    assert [] == analyze(word)
    assert {} == _search(table, word)


@pytest.mark.parametrize("word", KEPT_WORDS)
def test_stemmed_or_folded_non_stop_word_is_found(tmp_path, word):
    table = _table(tmp_path, [f"{word} apple", "apple pie"])
    assert 1 == len(analyze(word))
    assert [0] == list(_search(table, word))


def _corpus(seed: int, rows: int) -> list[str | None]:
    rng = random.Random(seed)
    words = "apple banana cherry river mountain house garden window ocean forest stone".split()
    words += ["the", "and", "running", "runs", "Café", "cafe", "don't"]
    texts: list[str | None] = [
        " ".join(rng.choice(words) for _ in range(rng.choice([1, 2, 5, 12, 40, 150])))
        for _ in range(rows)
    ]
    # Rows that analyze to nothing: none of them may count as a document.
    return texts + [None, "", "the and of it", "x" * 45, "   ...   "]


QUERIES = [
    "apple",
    "apple banana",
    "apple apple banana",  # a repeated term is summed twice
    "running river cafés",
    "the ocean",  # the stop word drops out
    "stone stone stone forest xyzzy",
]


def test_bm25_equals_lancedb_score(tmp_path):
    texts = _corpus(seed=7, rows=150)
    table = _table(tmp_path, texts)
    rows = dict(enumerate(texts))
    for query in QUERIES:
        _assert_scores_equal(_bm25(query, rows, texts), _search(table, query))


def test_bm25_of_rows_added_after_the_index(tmp_path):
    indexed = _corpus(seed=8, rows=80)
    added = _corpus(seed=9, rows=30)[:30] + ["apple apple apple apple"]
    table = _table(tmp_path, indexed)
    table.add(
        pa.table({
            "id": list(range(len(indexed), len(indexed) + len(added))),
            "text": pa.array(added, pa.string()),
        })
    )
    old_rows = dict(enumerate(indexed))
    new_rows = dict(enumerate(added, start=len(indexed)))
    for query in QUERIES:
        actual = _search(table, query)
        # Indexed rows keep the index's statistics; the added rows are scored with the
        # statistics of all rows.
        _assert_scores_equal(
            _bm25(query, old_rows, indexed), {i: s for i, s in actual.items() if i in old_rows}
        )
        _assert_scores_equal(
            _bm25(query, new_rows, indexed + added),
            {i: s for i, s in actual.items() if i in new_rows},
        )
    table.optimize()
    for query in QUERIES:
        expected = _bm25(query, old_rows | new_rows, indexed + added)
        _assert_scores_equal(expected, _search(table, query))


def test_a_word_is_stemmed_once_then_remembered():
    from propdex.resident.analyzer import analyze_word

    analyze_word.cache_clear()
    terms = analyze("owls hunted owls")
    info = analyze_word.cache_info()
    assert (["owl", "hunt", "owl"], 2, 1) == (terms, info.misses, info.hits)
