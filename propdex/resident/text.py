"""The postings of one segment's texts, for BM25 scoring the way LanceDB's full-text index does.

Terms come from propdex.resident.analyzer (LanceDB's default FTS analyzer); the statistics a
score needs (document count, average length, document frequencies) are not stored here but
summed by the view over the rows alive in every segment, so a segment never changes after
it is built.
"""

from __future__ import annotations

import itertools

import numpy as np

from propdex.resident.analyzer import analyze_word, split_words
from propdex.resident.ranges import slice_positions


class TextPostings:
    """Immutable: for each term of a segment, the rows holding it and how often."""

    def __init__(self, texts: list[str | None]):
        self.rows = len(texts)
        self._vocabulary: dict[str, int] = {}
        term_ids = _TermIds(self._vocabulary)
        lookup = term_ids.__getitem__
        # Per word a dict hit (in C, through map); each distinct word is analyzed once.
        # At 1M propositions (15M words) this and the sort below take about 8 s.
        words = [list(map(lookup, split_words(text))) if text else [] for text in texts]
        per_text = np.fromiter(map(len, words), dtype=np.int64, count=self.rows)
        ids = np.fromiter(itertools.chain.from_iterable(words), dtype=np.int64,
                          count=int(per_text.sum()))
        del words
        rows = np.repeat(np.arange(self.rows, dtype=np.int64), per_text)
        kept = ids >= 0  # words a filter dropped have no term
        ids, rows = ids[kept], rows[kept]
        self.lengths = np.bincount(rows, minlength=self.rows).astype(np.float32)
        # One entry per (term, row): unique keys sorted by term, then row.
        span = max(self.rows, 1)
        keys, counts = np.unique(ids * span + rows, return_counts=True)
        self._rows = (keys % span).astype(np.int32)
        self._frequencies = counts.astype(np.float32)
        terms = keys // span
        self._bounds = np.searchsorted(terms, np.arange(len(self._vocabulary) + 1))
        # Each row's terms (the postings again, by row): a view counts the terms of a
        # segment's masked rows from these, not from every posting list of a query.
        by_row = np.argsort(self._rows, kind="stable")
        self._terms_of_rows = terms[by_row].astype(np.int32)
        self._row_bounds = np.searchsorted(self._rows[by_row], np.arange(self.rows + 1))

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, term frequencies) of ``term``; empty arrays when no row holds it."""
        term_id = self._vocabulary.get(term)
        if term_id is None:
            return _NO_ROWS, _NO_FREQUENCIES
        span = slice(self._bounds[term_id], self._bounds[term_id + 1])
        return self._rows[span], self._frequencies[span]

    def frequency(self, term: str, less: np.ndarray | None = None) -> int:
        """Rows holding ``term``, less ``less[term id]`` (a ``term_counts`` of rows left out)."""
        term_id = self._vocabulary.get(term)
        if term_id is None:
            return 0
        rows = int(self._bounds[term_id + 1] - self._bounds[term_id])
        return rows if less is None else rows - int(less[term_id])

    def term_counts(self, rows: np.ndarray) -> np.ndarray:
        """Per term id, how many of ``rows`` (distinct row positions) hold the term."""
        rows = np.asarray(rows, dtype=np.int64)
        at, _ = slice_positions(self._row_bounds[rows], self._row_bounds[rows + 1])
        return np.bincount(self._terms_of_rows[at], minlength=len(self._vocabulary))


_NO_ROWS = np.zeros(0, dtype=np.int32)
_NO_FREQUENCIES = np.zeros(0, dtype=np.float32)


class _TermIds(dict[str, int]):
    """word -> id of its term in ``vocabulary`` (-1 when a filter drops the word)."""

    def __init__(self, vocabulary: dict[str, int]):
        super().__init__()
        self._vocabulary = vocabulary

    def __missing__(self, word: str) -> int:
        term = analyze_word(word)
        term_id = -1 if term is None else self._vocabulary.setdefault(term, len(self._vocabulary))
        self[word] = term_id
        return term_id
