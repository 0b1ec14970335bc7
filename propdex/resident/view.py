"""One consistent, immutable state of the resident index: what a search reads.

A view pairs the live documents of one documents-table version with the segments holding
exactly those documents' committed rows (masks hide rows of replaced or removed runs). It
answers the ``Rankings`` calls of propdex.search from memory, so a search costs a few
matrix products and array lookups instead of four LanceDB queries.

Full-text scores are BM25 as LanceDB's index computes them (propdex.resident.analyzer has
the analyzer and the formula), with the statistics of the rows the view holds: every row of
every live run, rejected propositions included, as LanceDB counts every row of its table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from propdex.resident.analyzer import analyze, bm25_idf, bm25_term_score
from propdex.resident.segment import Segment
from propdex.store.live import LiveDocuments
from propdex.store.schema import CHUNKS


@dataclass(frozen=True)
class TableState:
    """One table's segments and, per segment, which rows are live (``alive``) and which of
    those passed their grading (``keep``; every live chunk)."""

    segments: tuple[Segment, ...] = ()
    alive: tuple[np.ndarray, ...] = ()
    keep: tuple[np.ndarray, ...] = ()

    @classmethod
    def of(cls, segments: list[Segment], alive: list[np.ndarray]) -> TableState:
        return cls(tuple(segments), tuple(alive),
                   tuple(mask & s.passed for s, mask in zip(segments, alive, strict=True)))

    @functools.cached_property
    def whole(self) -> tuple[bool, ...]:
        """Per segment: every row is live."""
        return tuple(bool(mask.all()) for mask in self.alive)

    @property
    def live_rows(self) -> int:
        return int(sum(int(mask.sum()) for mask in self.alive))

    def text_statistics(self) -> tuple[int, float]:
        """(rows, average length) over the live rows holding at least one term: LanceDB
        leaves rows that analyze to nothing out of both."""
        rows = sum(int(np.count_nonzero(s.text.lengths[m]))
                   for s, m in zip(self.segments, self.alive, strict=True))
        terms = sum(float(s.text.lengths[m].sum())
                    for s, m in zip(self.segments, self.alive, strict=True))
        return rows, terms / rows if rows else 0.0


class ResidentView:
    """The Rankings of one documents-table version, answered from memory."""

    # Its rankings are short NumPy calls between Python steps: run at once on threads they
    # contend for the GIL, and one search took more CPU than its rankings one after another.
    concurrent = False

    def __init__(self, snapshot: LiveDocuments, tables: dict[str, TableState]):
        self.snapshot = snapshot
        self.tables = tables
        # Corpus statistics of each table for BM25, fixed for the life of the view.
        self._text_statistics = {name: state.text_statistics() for name, state in tables.items()}

    @property
    def version(self) -> int | None:
        return self.snapshot.version

    def live_documents(self) -> LiveDocuments:
        return self.snapshot

    # Rankings ----------------------------------------------------------------------------
    def vector_ranking(self, table: str, vector: np.ndarray, *, limit: int,
                       columns: Sequence[str], doc_ids: list[str] | None) -> list[dict]:
        state = self.tables[table]
        hits = []
        for number, segment in enumerate(state.segments):
            candidates = _candidates(segment, state.alive[number], state.keep[number], doc_ids)
            rows, scores = segment.vectors.search(vector, limit, candidates)
            hits.extend((float(score), number, int(row)) for row, score in zip(rows, scores))
        return self._rows_of(state, _best(hits, limit), columns)

    def text_ranking(self, table: str, query: str, *, limit: int, columns: Sequence[str],
                     doc_ids: list[str] | None) -> list[dict]:
        state = self.tables[table]
        query_terms = analyze(query)
        terms = list(dict.fromkeys(query_terms))
        if not terms or not state.segments:
            return []
        postings = [[segment.text.postings(term) for term in terms] for segment in state.segments]
        # Document frequencies over the live rows of every segment (a segment without
        # masked rows counts its postings as they are).
        frequencies = np.zeros(len(terms))
        for lists, alive, whole in zip(postings, state.alive, state.whole, strict=True):
            for position, (rows, _) in enumerate(lists):
                frequencies[position] += len(rows) if whole else np.count_nonzero(alive[rows])
        documents, average = self._text_statistics[table]
        idf = bm25_idf(frequencies, documents)
        hits = []
        # A term repeated in the query counts once per occurrence, as in LanceDB: every
        # occurrence is a term of the sum, in the query's order.
        occurrences = [terms.index(term) for term in query_terms]
        for number, (segment, lists) in enumerate(zip(state.segments, postings, strict=True)):
            candidates = _candidates(segment, state.alive[number], state.keep[number], doc_ids)
            rows, scores = _bm25(segment, [lists[i] for i in occurrences], idf[occurrences],
                                 average, candidates, limit)
            if len(rows) > limit:
                best = np.argpartition(-scores, limit - 1)[:limit]
                rows, scores = rows[best], scores[best]
            hits.extend((float(score), number, int(row)) for row, score in zip(rows, scores))
        return self._rows_of(state, _best(hits, limit), columns)

    def chunk_rows(self, chunk_ids: list[str], columns: Sequence[str]) -> list[dict]:
        state = self.tables[CHUNKS]
        hits = [(0.0, number, position)
                for number, (segment, alive) in enumerate(zip(state.segments, state.alive,
                                                              strict=True))
                for chunk_id in chunk_ids for position in segment.positions_of(chunk_id)
                if alive[position]]
        return [{k: v for k, v in row.items() if k != "score"}
                for row in self._rows_of(state, hits, columns)]

    @staticmethod
    def _rows_of(state: TableState, hits: list[tuple[float, int, int]],
                 columns: Sequence[str]) -> list[dict]:
        """Row dicts with ``columns`` and "score", in the order of ``hits``."""
        by_segment: dict[int, list[int]] = {}
        for _, number, row in hits:
            by_segment.setdefault(number, []).append(row)
        fetched: dict[tuple[int, int], dict] = {}
        for number, rows in by_segment.items():
            table = state.segments[number].table.select(list(columns))
            for row, values in zip(rows, table.take(rows).to_pylist(), strict=True):
                fetched[(number, row)] = values
        return [{**fetched[(number, row)], "score": score} for score, number, row in hits]


def _candidates(segment: Segment, alive: np.ndarray, passed: np.ndarray,
                doc_ids: list[str] | None) -> np.ndarray:
    """The rows a ranking may return, chosen as LanceRankings chooses them, so both give the
    same rows: without a document scope every live row (propdex.search drops rejected
    propositions afterwards), with one the live rows of those documents that passed."""
    return alive if doc_ids is None else passed & segment.documents_mask(doc_ids)


def _best(hits: list[tuple[float, int, int]], limit: int) -> list[tuple[float, int, int]]:
    """The ``limit`` best hits over all segments: score, then segment and row (repeatable)."""
    return sorted(hits, key=lambda hit: (-hit[0], hit[1], hit[2]))[:limit]


def _bm25(segment: Segment, lists: list[tuple[np.ndarray, np.ndarray]], idf: np.ndarray,
          average_length: float, allowed: np.ndarray, limit: int,
          ) -> tuple[np.ndarray, np.ndarray]:
    """(rows, BM25 scores) of the ``limit`` best allowed rows holding any of the terms."""
    parts_rows = []
    # Summed in float32, one term after the other, into one slot per row of the segment:
    # a term's rows are distinct, so each fancy-indexed += adds once per row. (Sorting the
    # postings of all terms to merge them cost 30 ms per query at 1M propositions.)
    scores = np.zeros(segment.rows, dtype=np.float32)
    for (rows, frequencies), term_idf in zip(lists, idf, strict=True):
        kept = allowed[rows]
        rows, frequencies = rows[kept], frequencies[kept]
        if not len(rows):
            continue
        scores[rows] += bm25_term_score(term_idf, frequencies, segment.text.lengths[rows],
                                        average_length)
        parts_rows.append(rows)
    if not parts_rows:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
    # Candidates are the rows of any term, some repeated; a row's score is the same in
    # each repeat, so the best ``limit`` distinct rows are among the best limit x terms.
    candidates = np.concatenate(parts_rows)
    wanted = min(len(candidates), limit * len(parts_rows))
    if len(candidates) > wanted:
        candidates = candidates[np.argpartition(-scores[candidates], wanted - 1)[:wanted]]
    candidates = np.unique(candidates)
    return candidates, scores[candidates]
