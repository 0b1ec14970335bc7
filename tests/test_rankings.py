"""Every reader ranks through LanceDB (propdex.search.rankings): a LanceReader kept by a
long-running reader takes each commit in at the next search, and never lets an unfinished
run through."""

from __future__ import annotations

import numpy as np
import pytest

from propdex.errors import StorageError
from propdex.search import search
from propdex.search.rankings import LanceReader
from propdex.store import Index
from propdex.store.schema import PROPOSITIONS
from tests.store_rows import DIM, axis, make_version

WORDS = ("owl fox bee zebra honey nectar savanna den night soil grass mammal river stone "
         "forest cloud winter summer harvest engine model level agent memory signal").split()


def document(number: int, run_id: str = "r1"):
    """A document of 3 chunks of 2 propositions (one rejected) drawing on WORDS."""
    rng = np.random.default_rng(number)

    def text(words: int) -> str:
        return " ".join(rng.choice(WORDS, size=words))

    return make_version(f"doc{number:03d}", run_id, [text(4 + number * 3 + i) for i in range(3)],
                        title=f"Document {number}", source=f"/corpus/d{number}.txt",
                        props={i: [text(4 + number * 6 + i * 2 + j) for j in range(2)]
                               for i in range(3)},
                        rejected={(1, 1)}, seed=number * 7 + len(run_id))


@pytest.fixture
def fresh(tmp_path) -> Index:
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    for number in range(5):
        index.replace_document(*document(number).rows)
    return index


@pytest.fixture
def reader(fresh) -> LanceReader:
    reader = LanceReader(fresh.uri)
    reader.rankings()  # every table opened before the writes of a test
    return reader


def results(source, query: str, vector, **options) -> list[dict]:
    return [r.to_dict() for r in search(source, query, vector, **options)]


def test_a_committed_document_is_searchable_at_the_next_search(fresh, reader):
    search(reader, "owl", axis(0), k=3)
    fresh.replace_document(*make_version("late", "r1", ["Walruses bask on ice floes."]).rows)
    hits = search(reader, "walruses", None, level="chunks", mode="fts", k=3)
    assert ["late:c0"] == [h.chunk_id for h in hits]


def test_a_replaced_document_shows_only_its_new_version(fresh, reader):
    fresh.replace_document(*make_version("doc001", "r2", ["Walruses bask on ice floes."]).rows)
    texts = [h.text for h in search(reader, "walruses bask", None, level="chunks",
                                    mode="fts", k=10, doc_ids=["doc001"])]
    all_chunks = {h.chunk_id for h in search(reader, "", axis(0), level="chunks",
                                             mode="vector", k=50, doc_ids=["doc001"])}
    assert (["Walruses bask on ice floes."], {"doc001:c0"}) == (texts, all_chunks)


def test_a_removed_document_is_no_longer_found(fresh, reader):
    fresh.delete_documents(["doc002"])
    docs = {h.doc_id for h in search(reader, "", axis(0), level="both", mode="vector", k=50)}
    assert ("doc002" in docs, len(docs)) == (False, 4)


def test_uncommitted_rows_are_never_returned(fresh, reader):
    unfinished = fresh.prepare_replacement(
        *make_version("doc001", "r9", ["Walruses bask on ice floes."]).rows)
    fresh._append_rows(unfinished)  # an ingest in progress: appended, not committed
    fresh.replace_document(*make_version("other", "r1", ["Penguins waddle."]).rows)
    runs = {h.doc_id for h in search(reader, "walruses penguins", axis(0), k=50)}
    texts = " ".join(h.text.lower() for h in search(reader, "walruses", None,
                                                    level="chunks", mode="fts", k=50))
    assert ({"other", "doc001"} <= runs, "walruses" in texts) == (True, False)


def test_the_rankings_of_one_search_keep_their_live_documents(fresh, reader):
    rankings = reader.rankings()
    before = results(rankings, "owl", axis(0), k=10)
    fresh.replace_document(*make_version("later", "r1", ["Owls hoot at night."]).rows)
    assert (before, "later" in reader.live_documents().runs) == (
        results(rankings, "owl", axis(0), k=10), True)


def test_an_index_searched_directly_gives_the_readers_results(fresh, reader):
    assert results(reader, "owl honey", axis(0), k=5) == results(fresh, "owl honey", axis(0), k=5)


def test_a_reader_of_no_index_finds_nothing(tmp_path):
    assert [] == search(LanceReader(str(tmp_path / "missing")), "owls", axis(0))


def test_an_index_without_tables_ranks_nothing(tmp_path):
    empty = LanceReader(str(tmp_path / "nothing")).rankings()
    assert ([], [], [], None) == (
        empty.vector_ranking(PROPOSITIONS, axis(0), limit=5, columns=["prop_id"], doc_ids=None),
        empty.text_ranking(PROPOSITIONS, "owl", limit=5, columns=["prop_id"], doc_ids=None),
        empty.chunk_rows(["a:c0"], ["chunk_id"]), empty.live_documents().version)


def test_a_query_vector_of_another_length_is_refused(fresh, reader):
    with pytest.raises(StorageError, match="^the query vector has shape \\(3,\\) but the "
                                          "propositions table in .* holds 8-dimensional"):
        reader.rankings().vector_ranking(PROPOSITIONS, axis(0)[:3], limit=5,
                                         columns=["prop_id"], doc_ids=None)


def test_the_vector_index_finds_what_an_exact_search_finds(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM, vector_index_threshold=20)
    for number in range(10):
        index.replace_document(*document(number).rows)
    index.optimize()
    exact = LanceReader(index.uri, exact=True).rankings()
    approximate = LanceReader(index.uri).rankings()
    ranked = [[r["prop_id"] for r in rankings.vector_ranking(
        PROPOSITIONS, axis(0), limit=3, columns=["prop_id"], doc_ids=None)]
        for rankings in (exact, approximate)]
    assert (True, ranked[0]) == (index.has_vector_index(PROPOSITIONS), ranked[1])
