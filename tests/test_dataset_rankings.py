"""A one-shot search reads through pylance (propdex.store.dataset_rankings): the same results
as through LanceDB, for every level, mode and filter."""

from __future__ import annotations

import itertools

import pytest

from propdex.store import Index
from propdex.store.dataset_rankings import DatasetRankings
from propdex.store.schema import PROPOSITIONS
from tests.store_rows import DIM, axis, make_version
from tests.test_resident import QUERIES, comparable, document, results


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Index:
    index = Index.open(str(tmp_path_factory.mktemp("datasets") / "db"), dim=DIM,
                       vector_index_threshold=200)
    for number in range(40):
        index.replace_document(*document(number).rows)
    index.optimize()  # the vector index (200 rows and more) and the full-text index
    index.replace_document(*document(3, run_id="r2", seed=99).rows)  # rows not indexed yet
    return index


def rankings(index: Index) -> DatasetRankings:
    return DatasetRankings(index.uri)


@pytest.mark.parametrize(("level", "mode", "k"), list(itertools.product(
    ["propositions", "chunks", "both"], ["vector", "fts", "hybrid"], [1, 5, 20])))
def test_results_equal_lancedb_results(index, level, mode, k):
    for query, vector in QUERIES:
        vector = None if mode == "fts" else vector
        expected = results(index, query, vector, level=level, mode=mode, k=k)
        assert comparable(expected) == comparable(
            results(rankings(index), query, vector, level=level, mode=mode, k=k))


@pytest.mark.parametrize("filters", [
    {"doc_ids": ["doc003", "doc004", "doc011"]},
    {"source_glob": "/corpus/notes/*"},
    {"doc_ids": ["no such document"]},
])
def test_filtered_results_equal_lancedb_results(index, filters):
    for query, vector in QUERIES:
        expected = results(index, query, vector, k=5, **filters)
        assert comparable(expected) == comparable(
            results(rankings(index), query, vector, k=5, **filters))


def test_the_vector_index_is_searched_with_lancedbs_probes(index):
    assert index.has_vector_index(PROPOSITIONS)
    ranked = rankings(index).vector_ranking(PROPOSITIONS, axis(0), limit=3,
                                            columns=["prop_id"], doc_ids=None)
    expected = index.vector_search(PROPOSITIONS, axis(0), limit=3, columns=["prop_id"])
    assert [r["prop_id"] for r in expected] == [r["prop_id"] for r in ranked]


def test_an_index_without_tables_ranks_nothing(tmp_path):
    empty = DatasetRankings(str(tmp_path / "nothing"))
    assert ([], [], [], None) == (
        empty.vector_ranking(PROPOSITIONS, axis(0), limit=5, columns=["prop_id"], doc_ids=None),
        empty.text_ranking(PROPOSITIONS, "owl", limit=5, columns=["prop_id"], doc_ids=None),
        empty.chunk_rows(["a:c0"], ["chunk_id"]), empty.live_documents().version)


def test_a_query_vector_of_another_length_is_refused(index):
    with pytest.raises(ValueError, match="384|dimensional"):
        rankings(index).vector_ranking(PROPOSITIONS, axis(0)[:3], limit=5,
                                       columns=["prop_id"], doc_ids=None)


def test_the_live_documents_are_read_once_per_search_source(index):
    source = rankings(index)
    first = source.live_documents()
    index.replace_document(*make_version("later", "r1", ["Committed after."]).rows)
    assert (first, "later" in first.runs) == (source.live_documents(), False)
