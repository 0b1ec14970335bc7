"""The postings of one segment's texts, for BM25 scoring the way LanceDB's full-text index does.

Terms come from propdex.resident.analyzer (LanceDB's default FTS analyzer); the statistics a
score needs (document count, average length, document frequencies) are not stored here but
summed by the view over the rows alive in every segment, so a segment never changes after
it is built.
"""

from __future__ import annotations

import numpy as np

from propdex.resident.analyzer import analyze_many


class TextPostings:
    """Immutable: for each term of a segment, the rows holding it and how often."""

    def __init__(self, texts: list[str | None]):
        token_lists = analyze_many([text or "" for text in texts])
        self.rows = len(token_lists)
        self.lengths = np.fromiter((len(tokens) for tokens in token_lists), dtype=np.float32,
                                   count=self.rows)
        vocabulary: dict[str, int] = {}
        term_ids = np.fromiter(
            (vocabulary.setdefault(token, len(vocabulary))
             for tokens in token_lists for token in tokens),
            dtype=np.int64, count=int(self.lengths.sum()))
        row_ids = np.repeat(np.arange(self.rows, dtype=np.int64), self.lengths.astype(np.int64))
        # One entry per (term, row): unique keys sorted by term, then row.
        keys, counts = np.unique(term_ids * max(self.rows, 1) + row_ids, return_counts=True)
        self._vocabulary = vocabulary
        self._rows = (keys % max(self.rows, 1)).astype(np.int32)
        self._frequencies = counts.astype(np.float32)
        self._bounds = np.searchsorted(keys // max(self.rows, 1),
                                       np.arange(len(vocabulary) + 1))

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, term frequencies) of ``term``; empty arrays when no row holds it."""
        term_id = self._vocabulary.get(term)
        if term_id is None:
            return _NO_ROWS, _NO_FREQUENCIES
        span = slice(self._bounds[term_id], self._bounds[term_id + 1])
        return self._rows[span], self._frequencies[span]


_NO_ROWS = np.zeros(0, dtype=np.int32)
_NO_FREQUENCIES = np.zeros(0, dtype=np.float32)
