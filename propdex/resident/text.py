"""The postings of one segment's texts, for BM25 scoring the way LanceDB's full-text index does.

Terms come from propdex.resident.analyzer (LanceDB's default FTS analyzer); the statistics a
score needs (document count, average length, document frequencies) are not stored here but
summed by the view over the rows alive in every segment, so a segment never changes after
it is built.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from propdex.resident.analyzer import analyze_word, split_words
from propdex.resident.ranges import slice_positions


class TextPostings:
    """Immutable: for each term of a segment, the rows holding it and how often."""

    def __init__(self, texts: list[str | None]):
        vocabulary: dict[str, int] = {}
        term_ids = _TermIds(vocabulary)
        lookup = term_ids.__getitem__
        # Per word a dict hit (in C, through map); each distinct word is analyzed once.
        # At 1M propositions (15M words) this and the sort below take about 8 s.
        words = [list(map(lookup, split_words(text))) if text else [] for text in texts]
        per_text = np.fromiter(map(len, words), dtype=np.int64, count=len(texts))
        ids = np.fromiter(itertools.chain.from_iterable(words), dtype=np.int64,
                          count=int(per_text.sum()))
        del words
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), per_text)
        kept = ids >= 0  # words a filter dropped have no term
        ids, rows = ids[kept], rows[kept]
        # One entry per (term, row): unique keys sorted by term, then row.
        span = max(len(texts), 1)
        keys, counts = np.unique(ids * span + rows, return_counts=True)
        self._hold(vocabulary, keys, counts.astype(np.float32),
                   np.bincount(rows, minlength=len(texts)).astype(np.float32))

    @classmethod
    def merged(cls, parts: Sequence[tuple[TextPostings, np.ndarray]]) -> TextPostings:
        """The postings of the rows ``keep`` (a boolean mask) of each part, the parts' rows
        one after the other: equal to those of the kept rows' texts, without analyzing them
        again. Why: the small segments beside commits are merged about once a second, and
        analyzing their texts again was most of each merge's CPU (a merge of 1,100 rows:
        25-31 ms, with merged postings 8.5-9.7 ms)."""
        vocabulary: dict[str, int] = {}
        span = max(sum(int(np.count_nonzero(keep)) for _, keep in parts), 1)
        keys, frequencies, lengths = [], [], []
        first_row = 0
        for postings, keep in parts:
            # Its kept rows numbered after the rows of the parts before (-1: left out), and
            # the terms they hold numbered in the merged vocabulary (ids are in insertion
            # order, so a part's term id is the term's place in its vocabulary).
            renumbered = np.where(keep, np.cumsum(keep) - 1 + first_row, -1)
            rows = renumbered[postings._rows]
            kept = rows >= 0
            terms = np.repeat(np.arange(len(postings._vocabulary)),
                              np.diff(postings._bounds))[kept]
            names = list(postings._vocabulary)
            term_ids = np.full(len(names), -1, dtype=np.int64)
            held = np.unique(terms)  # terms of no kept row stay out of the vocabulary
            term_ids[held] = [vocabulary.setdefault(names[term], len(vocabulary))
                              for term in held.tolist()]
            keys.append(term_ids[terms] * span + rows[kept])
            frequencies.append(postings._frequencies[kept])
            lengths.append(postings.lengths[keep])
            first_row += int(np.count_nonzero(keep))
        key = np.concatenate([np.zeros(0, np.int64), *keys])
        order = np.argsort(key, kind="stable")
        merged = cls.__new__(cls)
        merged._hold(vocabulary, key[order],
                     np.concatenate([_NO_FREQUENCIES, *frequencies])[order],
                     np.concatenate([np.zeros(0, np.float32), *lengths]))
        return merged

    def _hold(self, vocabulary: dict[str, int], keys: np.ndarray, frequencies: np.ndarray,
              lengths: np.ndarray) -> None:
        """Keep the postings: ``keys`` (term id x rows + row, ascending, distinct) and the
        term's ``frequencies`` in each row; ``lengths``: the terms of each row."""
        self.rows = len(lengths)
        self._vocabulary = vocabulary
        self.lengths = lengths
        span = max(self.rows, 1)
        self._rows = (keys % span).astype(np.int32)
        self._frequencies = frequencies
        terms = keys // span
        self._bounds = np.searchsorted(terms, np.arange(len(vocabulary) + 1))
        # Each row's terms (the postings again, by row): a view counts the terms of a
        # segment's masked rows from these, not from every posting list of a query.
        by_row = np.argsort(self._rows, kind="stable")
        self._terms_of_rows = terms[by_row].astype(np.int32)
        self._row_bounds = np.searchsorted(self._rows[by_row], np.arange(self.rows + 1))
        # term -> its postings, made the first time a query asks for the term: every search
        # looks up each query term in each segment, and slicing the arrays again each time
        # (NumPy scalars for bounds, two views) cost 3-4 microseconds per lookup, a tenth of
        # a BM25 ranking beside commits (45 lookups, three segments).
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, term frequencies) of ``term``; empty arrays when no row holds it."""
        postings = self._postings.get(term)
        if postings is None:
            term_id = self._vocabulary.get(term)
            if term_id is None:
                return _NO_ROWS, _NO_FREQUENCIES
            span = slice(int(self._bounds[term_id]), int(self._bounds[term_id + 1]))
            # Threads may both make it: the same views, and a dict store is atomic.
            postings = self._postings[term] = self._rows[span], self._frequencies[span]
        return postings

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
