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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from propdex.resident.analyzer import analyze, bm25_idf, bm25_length_norm
from propdex.resident.bm25 import top_bm25
from propdex.resident.segment import Segment
from propdex.store.live import LiveDocuments
from propdex.store.ranking import RANKING_KEYS
from propdex.store.schema import CHUNKS

# Set on a ranked row whose other columns are deferred: (segment number, row position).
_AT = "_resident_row"
# Document frequencies a view keeps (a few dozen bytes each): queries repeat most of their
# words, and a view lives for a second beside commits, for hours without them.
_MAX_CACHED_FREQUENCIES = 100_000


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

    @functools.cached_property
    def masked(self) -> tuple[np.ndarray, ...]:
        """Per segment, its rows that are not live, in ascending order: the rows of replaced
        or removed documents, a few among many (a merge rebuilds a segment that is half
        masked, propdex.resident.merging)."""
        return tuple(np.flatnonzero(~mask) for mask in self.alive)

    @functools.cached_property
    def masked_rows(self) -> np.ndarray:
        """Every segment's ``masked`` rows, numbered among all rows (at ``starts``)."""
        return _joined([rows + start for rows, start in zip(self.masked, self.starts.tolist(),
                                                            strict=True)], np.int64)

    @functools.cached_property
    def masked_terms(self) -> tuple[np.ndarray | None, ...]:
        """Per segment, per term id of its postings, how many of its masked rows hold the
        term (None: no row masked): a term's live rows are its postings less these."""
        return tuple(segment.text.term_counts(masked) if len(masked) else None
                     for segment, masked in zip(self.segments, self.masked, strict=True))

    @functools.cached_property
    def starts(self) -> np.ndarray:
        """Per segment, the position of its first row among every segment's rows."""
        return np.cumsum([0, *(segment.rows for segment in self.segments)])[:-1]

    @functools.cached_property
    def passed(self) -> np.ndarray:
        """Every segment's Segment.passed, one after the other (at ``starts``)."""
        return _joined([segment.passed for segment in self.segments], bool)

    @functools.cached_property
    def parents(self) -> np.ndarray:
        """Every segment's Segment.parents, one after the other, each with its segment
        number in the high 32 bits: one number per parent chunk of the table."""
        return _joined([(number << 32) | segment.parents
                        for number, segment in enumerate(self.segments)], np.int64)

    def at(self, numbers: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Positions in ``passed`` and ``parents`` of (segment number, row) hits."""
        return rows if len(self.segments) == 1 else self.starts[numbers] + rows

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
        # BM25's length part of every row, per (table, segment), for this view's average
        # lengths, and the counts of masked rows' terms: made here, by the thread making the
        # view (the refresher, beside a service), not by the first searches it serves.
        # Beside commits a view lives a second, and the document frequencies its searches
        # counted from posting lists and masks cost the first round of queries after each
        # refresh 5.61 ms per search against 5.26 once counted; counted from the masked
        # rows' terms, 5.35 (100k propositions after 20 new and 38 replaced documents, 11
        # alternating rounds of 100 searches).
        # (An average of 0 means no row holds a term, so no norm is ever read.)
        # Per table, one array over every segment's rows (at TableState.starts): a ranking
        # by BM25 scores all segments in one pass (see _text_best).
        self._length_norms = {
            name: _joined([bm25_length_norm(segment.text.lengths,
                                            self._text_statistics[name][1] or 1.0)
                           for segment in state.segments], np.float32)
            for name, state in tables.items()}
        for state in tables.values():  # cached properties, computed now
            state.masked_terms, state.passed, state.parents, state.masked_rows  # noqa: B018
        self._frequencies: dict[tuple[str, str], int] = {}  # (table, term) -> live rows

    @property
    def version(self) -> int | None:
        return self.snapshot.version

    def live_documents(self) -> LiveDocuments:
        return self.snapshot

    # Rankings ----------------------------------------------------------------------------
    def vector_ranking(self, table: str, vector: np.ndarray, *, limit: int,
                       columns: Sequence[str], doc_ids: list[str] | None) -> list[dict]:
        return _ranked_rows(self.tables[table], *self._vector_best(table, vector, limit, doc_ids),
                            columns)

    def text_ranking(self, table: str, query: str, *, limit: int, columns: Sequence[str],
                     doc_ids: list[str] | None) -> list[dict]:
        return _ranked_rows(self.tables[table], *self._text_best(table, query, limit, doc_ids),
                            columns)

    def ranked_groups(self, table: str, signal: str, query: str,
                      vector: Callable[[], np.ndarray], *, limit: int, groups: int,
                      columns: Sequence[str], doc_ids: list[str] | None,
                      ) -> tuple[RankedGroups, bool]:
        """The first ``groups`` parent chunks of the ``limit`` best rows of one signal
        ("vector" or "fts"), as propdex.search groups a ranking: the rows that passed, by
        chunk_id, each group at the place of its best row. Returns them and whether the
        ranking ran out of rows (fewer than ``limit``). Every row of a view is live, so none
        is left out for its run.

        Why: the default search groups four rankings of 60-100 rows and keeps 20 groups of
        each, of which its 5-10 results use a few; made into dicts, every ranked row was a
        fifth of a served search's CPU (py-spy, 32 clients at 100k propositions). Here rows
        are grouped by their Segment.parents numbers, and a group's rows become dicts only
        when it is looked up."""
        state = self.tables[table]
        best = (self._vector_best(table, vector(), limit, doc_ids) if signal == "vector"
                else self._text_best(table, query, limit, doc_ids))
        scores, numbers, rows = best
        exhausted = len(rows) < limit
        # Read from the view's arrays of every segment's rows: gathered segment by segment,
        # beside commits (two or three segments), these took a twentieth of a search.
        at = state.at(numbers, rows)
        if table != CHUNKS:  # chunks have no grades
            passed = state.passed[at]
            scores, numbers, rows, at = scores[passed], numbers[passed], rows[passed], at[passed]
        # A chunk's rows are one document's, and a document's live rows one segment's: the
        # segment number and the segment's code of the chunk name the group.
        codes = state.parents[at]
        return RankedGroups(state, columns, scores, numbers, rows, codes, groups), exhausted

    def _vector_best(self, table: str, vector: np.ndarray, limit: int,
                     doc_ids: list[str] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        state = self.tables[table]
        hits = [(number, *segment.vectors.search(vector, limit,
                                                 _candidates(state, number, doc_ids)))
                for number, segment in enumerate(state.segments)]
        return _best(hits, limit)

    def _text_best(self, table: str, query: str, limit: int, doc_ids: list[str] | None,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        state = self.tables[table]
        query_terms = _query_terms(query)
        terms = list(dict.fromkeys(query_terms))
        if not terms or not state.segments:
            return _best([], limit)
        postings = [[segment.text.postings(term) for term in terms] for segment in state.segments]
        frequencies = np.array([self._document_frequency(table, term) for term in terms],
                               dtype=np.float64)
        documents = self._text_statistics[table][0]
        idf = bm25_idf(frequencies, documents)
        # A term repeated in the query counts once per occurrence, as in LanceDB: every
        # occurrence is a term of the sum, in the query's order.
        occurrences = [terms.index(term) for term in query_terms]
        # Every segment in one pass, its rows numbered after those of the segments before
        # it (TableState.starts): a pass per segment cost each small segment beside the
        # first about 0.1 ms of NumPy calls per ranking, whatever its size. At 100k
        # propositions after 24 new and 41 replaced documents (the first segment and two
        # small ones), the two BM25 rankings of a search took 1.19 -> 1.07 ms (15 alternating
        # rounds; one segment: 0.86 both). A list per occurrence and segment, in that
        # order: each row's shares are summed in the query's term order as before, and
        # each list holds distinct rows (top_bm25's floor).
        starts = state.starts.tolist()
        lists = [(rows + start if start else rows, frequencies) for i in occurrences
                 for (rows, frequencies), start in zip((p[i] for p in postings), starts,
                                                      strict=True)]
        # Without a document scope, the masked rows are left out after scoring.
        allowed, excluded = ((None, state.masked_rows) if doc_ids is None else
                             (_joined([_candidates(state, number, doc_ids) for number in
                                       range(len(state.segments))], bool), None))
        rows, scores = top_bm25(len(state.passed), lists,
                                np.repeat(idf[occurrences], len(starts)),
                                self._length_norms[table], allowed, limit, excluded=excluded)
        # By score, then row: the order _best gives (segment, then row within it).
        order = np.lexsort((rows, -scores))
        rows, scores = rows[order].astype(np.int64), scores[order]
        if len(starts) == 1:
            return scores, np.zeros(len(rows), np.int64), rows
        numbers = np.searchsorted(state.starts, rows, side="right") - 1
        return scores, numbers, rows - state.starts[numbers]

    def chunk_rows(self, chunk_ids: list[str], columns: Sequence[str]) -> list[dict]:
        state = self.tables[CHUNKS]
        hits = [(number, position)
                for number, (segment, alive) in enumerate(zip(state.segments, state.alive,
                                                              strict=True))
                for chunk_id in chunk_ids for position in segment.positions_of(chunk_id)
                if alive[position]]
        return _column_rows(state, hits, columns)

    def _document_frequency(self, table: str, term: str) -> int:
        """Live rows holding ``term`` over every segment: its postings less its masked rows
        (TableState.masked_terms), remembered for the view's life (queries repeat words)."""
        key = (table, term)
        frequency = self._frequencies.get(key)
        if frequency is None:
            state = self.tables[table]
            frequency = sum(segment.text.frequency(term, less)
                            for segment, less in zip(state.segments, state.masked_terms,
                                                     strict=True))
            if len(self._frequencies) >= _MAX_CACHED_FREQUENCIES:
                self._frequencies.clear()  # a view that lives long and sees every word
            self._frequencies[key] = frequency
        return frequency

    def complete(self, table: str, rows: list[dict], columns: Sequence[str]) -> None:
        """Set the deferred ``columns`` on ranked rows of ``table`` (from this view)."""
        deferred = [row for row in rows if _AT in row]
        if not deferred:
            return
        hits = [row.pop(_AT) for row in deferred]
        wanted = [c for c in columns if c not in RANKING_KEYS]
        if not wanted:
            return
        for row, values in zip(deferred, _column_rows(self.tables[table], hits, wanted),
                               strict=True):
            row.update(values)


@functools.lru_cache(maxsize=4_096)
def _query_terms(query: str) -> tuple[str, ...]:
    """analyze(query), once per query for both tables' rankings (and repeated queries)."""
    return tuple(analyze(query))


def _best(hits: list[tuple[int, np.ndarray, np.ndarray]], limit: int,
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, segment numbers, rows) of the ``limit`` best of every segment's (number, rows,
    scores): by score, then segment and row (repeatable). NumPy throughout: a sort of Python
    tuples cost a served search 1 µs per ranked row."""
    if not hits:
        return np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64)
    scores = np.concatenate([scores for _, _, scores in hits])
    numbers = np.concatenate([np.full(len(rows), number) for number, rows, _ in hits])
    rows = np.concatenate([rows for _, rows, _ in hits])
    order = np.lexsort((rows, numbers, -scores))[:limit]
    return scores[order], numbers[order], rows[order]


class RankedGroups(Mapping[str, list[dict]]):
    """ResidentView.ranked_groups' answer: chunk_id -> that chunk's rows in the ranking,
    best first, in the order of the groups; a group's rows are made (as vector_ranking and
    text_ranking make rows) the first time it is looked up."""

    def __init__(self, state: TableState, columns: Sequence[str], scores: np.ndarray,
                 numbers: np.ndarray, rows: np.ndarray, codes: np.ndarray, groups: int):
        # Each distinct code is a group, placed by its first (best) row; the rows of the
        # first ``groups`` groups are kept as Python values. A ranking is 60-100 rows and a
        # group one to a few: a loop over them cost less than np.unique and its indexing
        # (a twentieth of a served search's CPU; py-spy, 32 clients at 100k propositions).
        place: dict[int, int] = {}  # code -> group
        self._members: list[list[tuple[float, int, int]]] = []
        for code, score, number, row in zip(codes.tolist(), scores.tolist(), numbers.tolist(),
                                            rows.tolist(), strict=True):
            group = place.get(code)
            if group is None:
                if len(place) == groups:
                    continue
                group = place[code] = len(place)
                self._members.append([])
            self._members[group].append((score, number, row))
        self._segments = state.segments
        self._keys = [c for c in columns if c in RANKING_KEYS]
        self._group = {self._segments[number].keys["chunk_id"][row]: group
                       for group, [(_, number, row), *_] in enumerate(self._members)}
        self._made: dict[str, list[dict]] = {}

    def __getitem__(self, chunk_id: str) -> list[dict]:
        made = self._made.get(chunk_id)
        if made is None:
            members = self._members[self._group[chunk_id]]  # KeyError for a chunk not kept
            made = self._made[chunk_id] = [
                {**{c: self._segments[number].keys[c][row] for c in self._keys},
                 "score": score, _AT: (number, row)}
                for score, number, row in members]
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._group)

    def __len__(self) -> int:
        return len(self._group)

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._group


def _gathered(state: TableState, numbers: np.ndarray, rows: np.ndarray,
              array: Callable[[Segment], np.ndarray]) -> np.ndarray:
    """Per hit (segment number, row), the value of the segment's ``array`` at the row."""
    if not state.segments:
        return np.zeros(0, dtype=np.int64)
    if len(state.segments) == 1:
        return array(state.segments[0])[rows]
    # Gathered segment by segment: beside commits a search ranks over a handful of
    # segments, and looking the keys up row by row was a sixteenth of its CPU.
    gathered = None
    for number in np.unique(numbers).tolist():
        at = numbers == number
        values = array(state.segments[number])[rows[at]]
        if gathered is None:
            gathered = np.empty(len(rows), dtype=values.dtype)
        gathered[at] = values
    return gathered if gathered is not None else array(state.segments[0])[rows]


def _joined(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)


def _key(name: str) -> Callable[[Segment], np.ndarray]:
    return lambda segment: segment.keys[name]


def _ranked_rows(state: TableState, scores: np.ndarray, numbers: np.ndarray, rows: np.ndarray,
                 columns: Sequence[str]) -> list[dict]:
    """One dict per hit, best first: the RANKING_KEYS among ``columns``, "score", and where
    the row is, for ``complete`` (the keys are Python objects already: Segment.keys)."""
    keys = [c for c in columns if c in RANKING_KEYS]
    values = [_gathered(state, numbers, rows, _key(c)).tolist() for c in keys]
    names = [*keys, "score", _AT]
    at = list(zip(numbers.tolist(), rows.tolist(), strict=True))
    return [dict(zip(names, row, strict=True))
            for row in zip(*values, scores.tolist(), at, strict=True)]


def _column_rows(state: TableState, hits: list[tuple[int, int]],
                 columns: Sequence[str]) -> list[dict]:
    """Row dicts with ``columns`` for (segment number, row) ``hits``, in their order."""
    by_segment: dict[int, list[int]] = {}  # segment -> positions in hits
    for position, (number, _) in enumerate(hits):
        by_segment.setdefault(number, []).append(position)
    rows: list[dict] = [{}] * len(hits)
    for number, positions in by_segment.items():
        taken = state.segments[number].columns.rows(columns, [hits[p][1] for p in positions])
        for position, row in zip(positions, taken, strict=True):
            rows[position] = row
    return rows


def _candidates(state: TableState, number: int, doc_ids: list[str] | None,
                ) -> np.ndarray | None:
    """The rows of segment ``number`` a ranking may return (None: all of them), chosen as
    LanceRankings chooses them, so both give the same rows: without a document scope every
    live row (propdex.search drops rejected propositions afterwards), with one the live rows
    of those documents that passed."""
    if doc_ids is None:
        # A segment without masked rows needs no mask: each posting list and probed slice
        # would be filtered by it for nothing.
        return None if state.whole[number] else state.alive[number]
    return state.keep[number] & state.segments[number].documents_mask(doc_ids)
