"""The resident index: the same results as LanceDB for every search, kept current by commits."""

from __future__ import annotations

import functools
import itertools
import time

import numpy as np
import pyarrow as pa
import pytest

from propdex.resident import ResidentIndex, merging
from propdex.resident.merging import MIN_LIVE_SHARE, merge_plan, merged_segment, swapped
from propdex.resident.segment import Segment
from propdex.resident.vectors import VectorMatrix
from propdex.resident.view import TableState
from propdex.search import CHUNK_COLUMNS, PROP_COLUMNS, search
from propdex.store import Index
from tests.prefect_server import wait_for
from tests.store_rows import DIM, axis, make_version, unit

WORDS = ("owl fox bee zebra honey nectar savanna den night soil grass mammal river stone "
         "forest cloud winter summer harvest engine model level agent memory signal").split()


def document(number: int, run_id: str = "r1", seed: int | None = None):
    """A document of 3 chunks of 2 propositions drawing on WORDS. Every row of a table has a
    length of its own, so no two rows tie on a BM25 score: each engine orders ties its own
    way (LanceDB's order among equal scores is not even stable), and results must be
    comparable one for one."""
    rng = np.random.default_rng(number if seed is None else seed)

    def text(words: int) -> str:
        return " ".join(rng.choice(WORDS, size=words))

    paragraphs = [text(4 + number * 3 + i) for i in range(3)]
    return make_version(f"doc{number:03d}", run_id, paragraphs, title=f"Document {number}",
                        source=f"/corpus/{'notes' if number % 2 else 'reports'}/d{number}.txt",
                        props={i: [text(4 + number * 6 + i * 2 + j) for j in range(2)]
                               for i in range(3)},
                        rejected={(1, 1)}, seed=number * 7 + len(run_id))


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Index:
    index = Index.open(str(tmp_path_factory.mktemp("resident") / "db"), dim=DIM)
    for number in range(40):
        index.replace_document(*document(number).rows)
    # As an ingest run ends: LanceDB scores rows added after its full-text index was built
    # with other statistics until optimize() indexes them (propdex.resident.analyzer).
    index.optimize()
    return index


@pytest.fixture
def fresh(tmp_path) -> Index:
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    for number in range(5):
        index.replace_document(*document(number).rows)
    return index


def results(source, query: str, vector, **options) -> list[dict]:
    return [r.to_dict() for r in search(source, query, vector, **options)]


def comparable(rows: list[dict]) -> list[dict]:
    """Results with scores rounded: LanceDB's and NumPy's float arithmetic differ last."""
    def rounded(row: dict) -> dict:
        return {**row, "score": round(row["score"], 4),
                "propositions": [{**p, "score": round(p["score"], 4)}
                                 for p in row["propositions"]]}
    return [rounded(row) for row in rows]


QUERIES = [("owl honey", axis(0)), ("zebra savanna grass", axis(3, 0.5, 1)),
           ("model level agent memory", unit(np.arange(1, DIM + 1))), ("winter", axis(5))]


@pytest.mark.parametrize(("level", "mode", "k"), list(itertools.product(
    ["propositions", "chunks", "both"], ["vector", "fts", "hybrid"], [1, 5, 20])))
def test_resident_results_equal_lancedb_results(index, level, mode, k):
    resident = ResidentIndex(index)
    for query, vector in QUERIES:
        vector = None if mode == "fts" else vector
        expected = results(index, query, vector, level=level, mode=mode, k=k)
        assert comparable(expected) == comparable(
            results(resident, query, vector, level=level, mode=mode, k=k))


@pytest.mark.parametrize("filters", [
    {"doc_ids": ["doc003", "doc004", "doc011"]},
    {"source_glob": "/corpus/notes/*"},
    {"doc_ids": ["doc002"], "source_glob": "*.txt"},
    {"doc_ids": ["no such document"]},
])
def test_resident_filters_equal_lancedb_filters(index, filters):
    resident = ResidentIndex(index)
    for query, vector in QUERIES:
        expected = results(index, query, vector, k=5, **filters)
        assert comparable(expected) == comparable(results(resident, query, vector, k=5, **filters))


def test_a_committed_document_is_searchable_at_the_next_search(fresh):
    resident = ResidentIndex(fresh)
    before = resident.view()
    fresh.replace_document(*make_version("late", "r1", ["Walruses bask on ice floes."]).rows)
    hits = search(resident, "walruses", None, level="chunks", mode="fts", k=3)
    assert (["late:c0"], False) == ([h.chunk_id for h in hits],
                                    "late" in before.live_documents().runs)


@pytest.fixture
def refreshed_every(fresh):
    """A ResidentIndex of ``fresh`` whose background refresher runs every given seconds."""
    made: list[ResidentIndex] = []

    def make(seconds: float) -> ResidentIndex:
        resident = ResidentIndex(fresh, refresh_seconds=seconds)
        resident.view()  # the first load, which starts the refresher
        made.append(resident)
        return resident

    yield make
    for resident in made:
        resident.close()


def walrus_chunks(resident: ResidentIndex) -> list[str]:
    return [h.chunk_id for h in search(resident, "walruses", None, level="chunks", mode="fts",
                                       k=3)]


def test_with_a_refresh_interval_a_search_does_not_wait_for_a_commit(fresh, refreshed_every):
    resident = refreshed_every(600)  # no refresh for ten minutes
    fresh.replace_document(*make_version("late", "r1", ["Walruses bask on ice floes."]).rows)
    assert ([], 0) == (walrus_chunks(resident), resident.refreshes - 1)


def test_the_background_refresher_brings_a_commit_in(fresh, refreshed_every):
    resident = refreshed_every(0.2)
    fresh.replace_document(*make_version("late", "r1", ["Walruses bask on ice floes."]).rows)
    assert ["late:c0"] == wait_for(lambda: walrus_chunks(resident), timeout=10, interval=0.05,
                                   what="the commit to be searchable")


def test_commits_in_a_burst_are_brought_in_together(fresh, refreshed_every):
    resident = refreshed_every(2)
    started, before = time.monotonic(), resident.refreshes
    for number in range(5, 10):
        fresh.replace_document(*document(number).rows)
    committed = time.monotonic() - started
    wait_for(lambda: "doc009" in resident.view().live_documents().runs, timeout=10,
             interval=0.05, what="the last commit to be searchable")
    # At most one refresh per 2 s, plus the one a first commit may start at once.
    assert resident.refreshes - before <= 1 + int(committed / 2) + 1


def test_a_negative_refresh_interval_is_refused(fresh):
    with pytest.raises(ValueError, match="refresh_seconds"):
        ResidentIndex(fresh, refresh_seconds=-1)


def test_a_replaced_document_shows_only_its_new_version(fresh):
    resident = ResidentIndex(fresh)
    resident.view()
    fresh.replace_document(*make_version("doc001", "r2", ["Walruses bask on ice floes."]).rows)
    texts = [h.text for h in search(resident, "walruses bask", None, level="chunks",
                                    mode="fts", k=10, doc_ids=["doc001"])]
    all_chunks = {h.chunk_id for h in search(resident, "", axis(0), level="chunks",
                                             mode="vector", k=50, doc_ids=["doc001"])}
    assert (["Walruses bask on ice floes."], {"doc001:c0"}) == (texts, all_chunks)


def test_a_removed_document_leaves_the_resident_index(fresh):
    resident = ResidentIndex(fresh)
    resident.view()
    fresh.delete_documents(["doc002"])
    docs = {h.doc_id for h in search(resident, "", axis(0), level="both", mode="vector", k=50)}
    assert ("doc002" in docs, len(docs)) == (False, 4)


def append_while_another_commits(index: Index):
    """The rows of doc001's run r9 appended but not committed (an ingest in progress) while
    another document commits; returns the replacement, to commit."""
    unfinished = index.prepare_replacement(
        *make_version("doc001", "r9", ["Walruses bask on ice floes."]).rows)
    index._append_rows(unfinished)
    index.replace_document(*make_version("other", "r1", ["Penguins waddle."]).rows)
    return unfinished


def test_uncommitted_rows_are_never_returned(fresh):
    resident = ResidentIndex(fresh)
    resident.view()
    append_while_another_commits(fresh)
    runs = {(h.doc_id, h.chunk_id) for h in search(resident, "walruses penguins", axis(0),
                                                   level="both", mode="hybrid", k=50)}
    assert (("other", "other:c0") in runs, ("doc001", "doc001:c0") in runs,
            "walruses" in " ".join(h.text.lower() for h in search(
                resident, "walruses", None, level="chunks", mode="fts", k=50))) == (
        True, True, False)


def test_a_run_committed_after_a_refresh_saw_its_rows_is_searchable(fresh):
    # Its rows sit in fragments an earlier refresh read (propdex.resident.fragments).
    resident = ResidentIndex(fresh)
    resident.view()
    unfinished = append_while_another_commits(fresh)
    resident.view()  # the refresh that brings "other" in
    fresh._commit_document(unfinished)
    hits = search(resident, "walruses", None, level="chunks", mode="fts", k=5)
    assert [("doc001", "Walruses bask on ice floes.")] == [(h.doc_id, h.text) for h in hits]


class CommitsDuringARead(Index):
    """An index whose next read of chunk rows first lets ``writer`` commit: the moment at
    which a concurrent ingest can land in the middle of a refresh."""

    writer = None

    def read_batches(self, name, columns, where=None, *, version=None):
        if self.writer is not None and name == "chunks":
            writer, self.writer = self.writer, None
            writer()
        yield from super().read_batches(name, columns, where, version=version)


def test_a_replacement_committed_during_a_refresh_leaves_the_refreshed_view_whole(tmp_path):
    db = str(tmp_path / "db")
    index = CommitsDuringARead.open(db, dim=DIM)
    writer = Index.open(db, dim=DIM)
    index.replace_document(*make_version("doc", "r1", ["Walruses bask."]).rows)
    resident = ResidentIndex(index)
    resident.view()
    writer.replace_document(*make_version("doc", "r2", ["Walruses swim."]).rows)
    # While the refresh to r2 reads its rows, r3 is committed and r2's rows are deleted.
    index.writer = lambda: writer.replace_document(
        *make_version("doc", "r3", ["Walruses dive."]).rows)
    view = resident.view()
    hit = search(view, "walruses", None, level="propositions", mode="fts", k=1)[0]
    assert ("doc:c0", "Walruses swim.") == (hit.chunk_id, hit.chunk_text)


def test_a_view_in_use_is_unchanged_by_a_commit(fresh):
    resident = ResidentIndex(fresh)
    view = resident.view()
    before = results(view, "owl", axis(0), k=10)
    fresh.delete_documents(["doc000", "doc001"])
    resident.view()
    assert before == results(view, "owl", axis(0), k=10)


def test_merged_segments_give_the_same_results_as_lancedb(fresh, monkeypatch):
    monkeypatch.setattr(merging, "SMALL_SEGMENT_ROWS", 0)  # the counter alone: segments
    resident = ResidentIndex(fresh)
    for number in range(5, 30):  # one commit (one new segment) at a time
        fresh.replace_document(*document(number).rows)
        resident.view()
    fresh.replace_document(*document(6, run_id="r2", seed=99).rows)
    resident.view()
    resident.wait_for_merges()
    view = resident.view()
    for query, vector in QUERIES:
        assert comparable(results(fresh, query, vector, k=10)) == comparable(
            results(view, query, vector, k=10))
    # 26 commits, merged by the binary-counter rule: a handful of segments, none mostly dead.
    state = view.tables["chunks"]
    assert (True, True) == (2 <= len(state.segments) <= 6,
                            all(mask.mean() >= MIN_LIVE_SHARE for mask in state.alive))


def test_rows_replaced_while_a_merge_was_built_are_masked_in_it(fresh):
    resident = ResidentIndex(fresh)
    for number in range(5, 7):
        fresh.replace_document(*document(number).rows)
        resident.view()
    resident.wait_for_merges()
    base = resident.view().tables["chunks"]
    plan = (0, len(base.segments))
    merged = merged_segment(base, *plan, key="chunk_id", exact=False)
    state = swapped(base, *plan, merged, gone=["doc005"])
    live = {row["doc_id"] for segment, mask in zip(state.segments, state.alive, strict=True)
            for row, alive in zip(segment.table.select(["doc_id"]).to_pylist(), mask,
                                  strict=True) if alive}
    assert ({f"doc{n:03d}" for n in (0, 1, 2, 3, 4, 6)}, 1) == (live, len(state.segments))


@pytest.mark.parametrize(("live", "expected"), [
    ([100], None),
    ([100, 10], None),
    ([100, 60], (0, 2)),
    ([100, 30, 20], (1, 3)),
    ([100, 30, 0], (2, 3)),
])
def test_the_newest_segment_merges_while_it_holds_half_the_rows_before_it(live, expected,
                                                                           monkeypatch):
    monkeypatch.setattr(merging, "SMALL_SEGMENT_ROWS", 0)  # the counter alone
    segments = [make_segment(n) for n in live]
    alive = [np.arange(max(n, 1)) < n for n in live]  # an empty one: one masked row
    assert expected == merge_plan(TableState.of(segments, alive))


@pytest.mark.parametrize(("live", "small", "expected"), [
    ([100, 10], 101, (0, 2)),  # the one before is small: the newest joins it at once
    ([100, 10], 100, None),  # not small: the counter waits for 50 rows
    ([300, 100, 10], 100, None),  # the one before holds 100 rows: not below the floor
    ([300, 80, 10], 100, (1, 3)),
])
def test_the_newest_segment_joins_a_small_one_before_it_at_once(live, small, expected,
                                                                  monkeypatch):
    monkeypatch.setattr(merging, "SMALL_SEGMENT_ROWS", small)
    segments = [make_segment(n) for n in live]
    alive = [np.ones(n, dtype=bool) for n in live]
    assert expected == merge_plan(TableState.of(segments, alive))


def test_commits_of_a_few_rows_each_are_held_in_one_segment(fresh):
    resident = ResidentIndex(fresh)
    resident.view()
    for number in range(5, 25):  # 20 commits of one document (3 chunks) each
        fresh.replace_document(*document(number).rows)
        resident.view()
        resident.wait_for_merges()
    view = resident.view()
    assert ([1, 1], 25 * 3) == ([len(state.segments) for state in view.tables.values()],
                                view.tables["chunks"].live_rows)


def make_segment(rows: int):
    version = document(rows)
    chunks = (version.chunks * (1 + max(rows, 1) // 3))[:max(rows, 1)]
    table = pa.Table.from_pylist([{k: c[k] for k in CHUNK_COLUMNS} for c in chunks])
    return Segment(table, np.stack([c["vector"] for c in chunks]), key="chunk_id")


def test_a_resident_index_of_no_database_finds_nothing(tmp_path):
    resident = ResidentIndex(Index.open(str(tmp_path / "missing"), create=False))
    assert [] == search(resident, "owls", axis(0))


def test_ivf_search_finds_the_exact_neighbours(monkeypatch):
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((300, 64)).astype(np.float32)
    vectors = centres[rng.integers(0, 300, 60_000)] + 0.5 * rng.standard_normal(
        (60_000, 64)).astype(np.float32)
    approximate, exact = VectorMatrix(vectors), VectorMatrix(vectors, exact=True)
    queries = vectors[rng.integers(0, 60_000, 50)] + 0.2 * rng.standard_normal(
        (50, 64)).astype(np.float32)
    found = [len(set(approximate.search(q, 10)[0]) & set(exact.search(q, 10)[0]))
             for q in queries]
    assert (True, True) == (approximate.approximate, sum(found) / (10 * len(queries)) >= 0.98)


def test_ivf_search_keeps_only_the_rows_asked_for():
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((60_000, 16)).astype(np.float32)
    keep = np.zeros(60_000, dtype=bool)
    keep[::7] = True
    rows, _ = VectorMatrix(vectors).search(vectors[14], 10, keep)
    assert (14, True) == (int(rows[0]), bool(keep[rows].all()))


def embedding_like(rows: int, seed: int, dim: int = 384) -> np.ndarray:
    """Vectors whose energy lies mostly in a few directions, as text embeddings' does."""
    rng = np.random.default_rng(seed)
    mixing = np.random.default_rng(0).standard_normal((48, dim)).astype(np.float32)
    return (rng.standard_normal((rows, 48)).astype(np.float32) @ mixing
            + 5.5 * rng.standard_normal((rows, dim)).astype(np.float32))


def test_a_large_matrix_is_searched_on_a_sketch_and_finds_the_exact_neighbours():
    vectors = embedding_like(6_000, seed=5)
    sketched, exact = VectorMatrix(vectors.copy()), VectorMatrix(vectors.copy(), exact=True)
    queries = embedding_like(40, seed=6)
    found = [len(set(sketched.search(q, 10)[0]) & set(exact.search(q, 10)[0]))
             for q in queries]
    assert (True, False, True) == (sketched.approximate, exact.approximate,
                                   sum(found) / (10 * len(queries)) >= 0.98)


def test_a_sketched_search_scores_rows_on_all_their_coordinates():
    vectors = embedding_like(6_000, seed=7)
    unit_vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    query = unit_vectors[123]
    rows, scores = VectorMatrix(vectors).search(query, 5)
    np.testing.assert_allclose(unit_vectors[rows] @ query, scores, rtol=1e-5)


def test_a_sketched_search_keeps_only_the_rows_asked_for():
    vectors = embedding_like(6_000, seed=8)
    keep = np.zeros(6_000, dtype=bool)
    keep[::9] = True
    query = vectors[18].copy()  # the matrix takes its vectors over (rotated in place)
    rows, _ = VectorMatrix(vectors).search(query, 10, keep)
    assert (18, 10, True) == (int(rows[0]), len(rows), bool(keep[rows].all()))


@pytest.mark.parametrize("rows", [6_000, 60_000])  # sketched; sketched and IVF
def test_a_sketched_matrix_gives_back_its_vectors_in_row_order(rows):
    vectors = embedding_like(rows, seed=9)
    unit_vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(unit_vectors, VectorMatrix(vectors.copy()).in_row_order(),
                               atol=1e-5)


def test_vectors_spread_over_every_axis_are_not_sketched():
    vectors = np.random.default_rng(10).standard_normal((6_000, 384)).astype(np.float32)
    assert False is VectorMatrix(vectors).approximate


def test_a_resident_ranking_defers_all_but_the_keys(index):
    view = ResidentIndex(index).view()
    rows = view.vector_ranking("chunks", axis(0), limit=3, columns=CHUNK_COLUMNS, doc_ids=None)
    assert {"chunk_id", "doc_id", "run_id"} == set(rows[0]) & set(CHUNK_COLUMNS)


def test_complete_gives_ranked_rows_the_columns_lancedb_gives(index):
    view = ResidentIndex(index).view()
    rows = view.vector_ranking("chunks", axis(0), limit=3, columns=CHUNK_COLUMNS, doc_ids=None)
    view.complete("chunks", rows, CHUNK_COLUMNS)
    expected = index.rankings().vector_ranking("chunks", axis(0), limit=3,
                                               columns=CHUNK_COLUMNS, doc_ids=None)
    assert [{**r, "score": round(r["score"], 4)} for r in expected] == [
        {**r, "score": round(r["score"], 4)} for r in rows]


@pytest.fixture(scope="module")
def segmented(tmp_path_factory):
    """A view over several segments, one with masked rows (a replaced document)."""
    index = Index.open(str(tmp_path_factory.mktemp("segmented") / "db"), dim=DIM)
    resident = ResidentIndex(index)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(merging, "SMALL_SEGMENT_ROWS", 0)  # no merge: several segments
        for number in range(12):
            index.replace_document(*document(number).rows)
            resident.view()
        index.replace_document(*document(3, run_id="r2", seed=5).rows)
        view = resident.view()
    assert len(view.tables["propositions"].segments) > 2
    return view


def groups_of_rows(rows: list[dict], groups: int) -> dict[str, list[dict]]:
    """propdex.search's rule: rows that passed, by chunk_id, the first ``groups`` groups."""
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("passed", True) is True:
            grouped.setdefault(row["chunk_id"], []).append(row)
    return dict(list(grouped.items())[:groups])


@pytest.mark.parametrize(("table", "signal", "doc_ids"), list(itertools.product(
    ["propositions", "chunks"], ["vector", "fts"], [None, ["doc003", "doc007", "doc010"]])))
def test_ranked_groups_are_the_groups_of_the_ranked_rows(segmented, table, signal, doc_ids):
    columns = CHUNK_COLUMNS if table == "chunks" else PROP_COLUMNS
    for query, vector in QUERIES:
        ranking = (segmented.vector_ranking if signal == "vector" else
                   functools.partial(segmented.text_ranking, query=query))
        rows = ranking(table, **({"vector": vector} if signal == "vector" else {}),
                       limit=12, columns=columns, doc_ids=doc_ids)
        groups, exhausted = segmented.ranked_groups(table, signal, query, lambda: vector,
                                                    limit=12, groups=4, columns=columns,
                                                    doc_ids=doc_ids)
        assert (groups_of_rows(rows, 4), len(rows) < 12) == (dict(groups), exhausted)


def test_ranked_groups_make_rows_only_of_the_groups_looked_up(segmented):
    groups, _ = segmented.ranked_groups("propositions", "vector", "", lambda: axis(0),
                                        limit=30, groups=5, columns=PROP_COLUMNS, doc_ids=None)
    first = next(iter(groups))
    made_before = dict(groups._made)
    rows = groups[first]
    assert ({}, {first: rows}) == (made_before, groups._made)


TEXTS = ["the cat sat on the mat", None, "a dog and a cat", "", "dogs bark at cats",
         "the mat is red"]


@pytest.mark.parametrize("left_out", [[], [0], [0, 2], [1, 3], [0, 2, 4, 5]])
def test_term_counts_count_the_terms_of_the_rows_given(left_out):
    from propdex.resident.analyzer import analyze
    from propdex.resident.text import TextPostings

    postings = TextPostings(TEXTS)
    counts = postings.term_counts(np.array(left_out, dtype=np.int64))
    expected = {term: sum(term in set(analyze(TEXTS[row] or "")) for row in left_out)
                for text in TEXTS for term in analyze(text or "")}
    assert expected == {term: int(counts[postings._vocabulary[term]]) for term in expected}


@pytest.mark.parametrize("left_out", [[], [0], [2, 4], [0, 1, 2, 3, 4, 5]])
def test_a_terms_frequency_less_the_rows_left_out(left_out):
    from propdex.resident.analyzer import analyze
    from propdex.resident.text import TextPostings

    postings = TextPostings(TEXTS)
    less = postings.term_counts(np.array(left_out, dtype=np.int64)) if left_out else None
    for term in ["cat", "mat", "dog", "bark", "unknown"]:
        expected = sum(term in analyze(text or "") for row, text in enumerate(TEXTS)
                       if row not in left_out)
        assert expected == postings.frequency(term, less)


def _all_postings(postings) -> dict[str, tuple[list[int], list[float]]]:
    """term -> (rows, frequencies) for every term holding a row."""
    found = {}
    for term in postings._vocabulary:
        rows, frequencies = postings.postings(term)
        if len(rows):
            found[term] = (rows.tolist(), frequencies.tolist())
    return found


@pytest.mark.parametrize("keeps", [
    ([True] * 3, [True] * 3),
    ([True, False, True], [True] * 3),
    ([False] * 3, [True, False, True]),
    ([True, True, False], [False, True, True]),
    ([False] * 3, [False] * 3),
])
def test_merged_postings_equal_the_postings_of_the_kept_texts(keeps):
    from propdex.resident.text import TextPostings

    parts = [(TEXTS[:3], np.array(keeps[0])), (TEXTS[3:], np.array(keeps[1]))]
    kept = [text for texts, keep in parts for text, k in zip(texts, keep, strict=True) if k]
    expected = TextPostings(kept)
    actual = TextPostings.merged([(TextPostings(texts), keep) for texts, keep in parts])
    assert (_all_postings(expected), expected.lengths.tolist(), expected.rows) == (
        _all_postings(actual), actual.lengths.tolist(), actual.rows)


def test_merged_postings_count_the_terms_of_rows_as_analyzed_ones_do():
    from propdex.resident.text import TextPostings

    whole = [(TextPostings(TEXTS[:3]), np.ones(3, bool)),
             (TextPostings(TEXTS[3:]), np.ones(3, bool))]
    expected, actual = TextPostings(TEXTS), TextPostings.merged(whole)
    left_out = np.array([0, 2, 5], dtype=np.int64)
    less_expected, less_actual = expected.term_counts(left_out), actual.term_counts(left_out)
    assert ({term: expected.frequency(term, less_expected) for term in expected._vocabulary}
            == {term: actual.frequency(term, less_actual) for term in expected._vocabulary})
