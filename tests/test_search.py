"""Search: levels, modes, filters, parent grouping, live rows only, empty databases."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from propdex.search import (
    DEFAULT_K,
    DEFAULT_LEVEL,
    DEFAULT_MODE,
    RRF_K,
    SearchResult,
    reciprocal_rank_fusion,
    search,
)
from propdex.store import Index
from tests.store_rows import DIM, axis, make_version, unit

ALPHA_SOURCE = "/corpus/reports/alpha report.pdf"
BETA_SOURCE = "/corpus/notes/beta.txt"


def alpha(run_id: str = "r1"):
    return make_version(
        "alpha", run_id,
        ["Owls hunt small mammals at night.", "Foxes dig dens in sandy soil."],
        source=ALPHA_SOURCE, title="Alpha Report",
        props={0: ["Owls hunt at night.", "Owls eat small mammals."],
               1: ["Foxes dig dens.", "They dig."]},
        chunk_vectors={0: axis(0, 0.2, 1), 1: axis(1, 0.2, 6)},
        prop_vectors={(0, 0): axis(0), (0, 1): axis(0, 0.3, 2), (1, 0): axis(1), (1, 1): axis(3)},
        rejected={(1, 1)},
    )


def beta(run_id: str = "r1"):
    return make_version(
        "beta", run_id,
        ["Bees make honey from nectar.", "Zebras graze on the savanna grass."],
        source=BETA_SOURCE, title="Beta Notes",
        props={0: ["Bees make honey.", "Honey comes from nectar."],
               1: ["Zebras graze.", "Zebras live on the savanna."]},
        chunk_vectors={0: axis(2, 0.2, 7), 1: axis(4, 0.2, 7)},
        prop_vectors={(0, 0): axis(2), (0, 1): axis(2, 0.5, 0), (1, 0): axis(4),
                      (1, 1): axis(4, 0.2, 5)},
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Index:
    index = Index.open(str(tmp_path_factory.mktemp("search") / "db"), dim=DIM)
    index.replace_document(*alpha().rows)
    index.replace_document(*beta().rows)
    return index


def ids(results) -> list[str]:
    return [r.chunk_id for r in results]


# Levels ---------------------------------------------------------------------------------
def test_proposition_hits_are_grouped_by_parent_and_scored_by_the_best(index):
    results = search(index, "owls", axis(0), mode="vector", level="propositions", k=2)
    first = results[0]
    assert (
        ["alpha:c0", "beta:c0"], ["alpha:c0:p0", "alpha:c0:p1"], "Owls hunt at night.",
        pytest.approx([1.0, 0.5 / np.sqrt(1.25)], abs=1e-5),
    ) == (
        ids(results), [p["prop_id"] for p in first.propositions], first.text,
        [r.score for r in results],
    )


def test_a_proposition_hit_carries_its_parent_chunk_and_citation(index):
    hit = search(index, "owls", axis(0), mode="vector", level="propositions", k=1)[0].to_dict()
    assert {
        "level": "proposition", "doc_id": "alpha", "prop_id": "alpha:c0:p0",
        "chunk_text": "Owls hunt small mammals at night.", "header": "Alpha Report / part 0",
        "section": "Section 0", "title": "Alpha Report", "source": ALPHA_SOURCE,
        "page_start": 1, "page_end": 1, "char_start": 0, "char_end": 33,
    } == {k: hit[k] for k in ("level", "doc_id", "prop_id", "chunk_text", "header", "section",
                              "title", "source", "page_start", "page_end", "char_start",
                              "char_end")}


def test_rejected_propositions_are_never_returned(index):
    results = search(index, "dig", axis(3), mode="vector", level="propositions", k=10)
    returned = {p["prop_id"] for r in results for p in r.propositions}
    assert ("alpha:c1:p1" in returned, len(returned)) == (False, 7)


def test_chunk_scores_are_cosine_similarities(index):
    query = unit([1.0, 0.5, 0, 0, 0, 0, 0, 0])
    vectors = {c["chunk_id"]: c["vector"] for c in alpha().chunks + beta().chunks}
    results = search(index, "", query, mode="vector", level="chunks", k=10)
    expected = {chunk_id: pytest.approx(float(query @ v), abs=1e-5)
                for chunk_id, v in vectors.items()}
    assert expected == {r.chunk_id: r.score for r in results}


def test_chunk_hits_have_no_proposition_and_their_own_text(index):
    hit = search(index, "", axis(4), mode="vector", level="chunks", k=1)[0]
    assert ("chunk", None, "Zebras graze on the savanna grass.", [], "beta:c1") == (
        hit.level, hit.prop_id, hit.chunk_text, hit.propositions, hit.chunk_id)


def rrf(*rankings: list[str]) -> dict[str, float]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, chunk_id in enumerate(ranking, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1 / (RRF_K + rank)
    return fused


def test_both_levels_fuse_the_chunk_rankings_of_propositions_and_chunks(index):
    query = unit([1.0, 0.6, 0.3, 0, 0, 0, 0, 0])
    props = ids(search(index, "", query, level="propositions", mode="vector", k=4))
    chunks = ids(search(index, "", query, level="chunks", mode="vector", k=4))
    expected = rrf(props, chunks)
    both = search(index, "", query, level="both", mode="vector", k=4)
    assert (sorted(expected, key=lambda c: -expected[c]), pytest.approx(expected)) == (
        ids(both), {r.chunk_id: r.score for r in both})


def test_hybrid_both_fuses_four_rankings(index):
    query = unit([0.2, 0.1, 0.1, 0, 1.0, 0, 0, 0])
    rankings = [ids(search(index, "owls honey", query if mode == "vector" else None,
                           level=level, mode=mode, k=4))
                for level in ("propositions", "chunks") for mode in ("vector", "fts")]
    expected = rrf(*rankings)
    both = search(index, "owls honey", query, level="both", mode="hybrid", k=4)
    assert (sorted(expected, key=lambda c: -expected[c]), pytest.approx(expected)) == (
        ids(both), {r.chunk_id: r.score for r in both})


@pytest.mark.parametrize(("query", "expected"), [
    # Its propositions rank alpha:c0 first: the hit shows the best proposition.
    (axis(0), ("alpha:c0", "proposition", "Owls hunt at night.", "alpha:c0:p0")),
    # Only the chunk vector leans towards 6 (alpha:c1's propositions do not): the hit
    # shows the chunk's text.
    (axis(6, 0.3, 7), ("alpha:c1", "chunk", "Foxes dig dens in sandy soil.", None)),
])
def test_a_fused_hit_shows_the_unit_that_ranked_its_chunk_best(index, query, expected):
    hit = search(index, "", query, level="both", mode="vector", k=1)[0]
    assert expected == (hit.chunk_id, hit.level, hit.text, hit.prop_id)


def test_a_fused_hit_cites_its_parent_chunk_and_lists_its_propositions(index):
    hit = search(index, "", axis(2), level="both", mode="vector", k=1)[0]
    assert ("beta:c0", "Bees make honey from nectar.", 0, ["beta:c0:p0", "beta:c0:p1"]) == (
        hit.chunk_id, hit.chunk_text, hit.char_start, [p["prop_id"] for p in hit.propositions])


def test_an_unspecified_level_and_mode_is_the_default_search(index):
    query = unit([0.2, 0.1, 0.1, 0, 1.0, 0, 0, 0])
    explicit = search(index, "owls honey", query, level=DEFAULT_LEVEL, mode=DEFAULT_MODE, k=4)
    assert [r.to_dict() for r in explicit] == [
        r.to_dict() for r in search(index, "owls honey", query, k=4)]


def test_k_larger_than_the_index_returns_every_live_chunk(index):
    assert 4 == len(search(index, "", axis(0), mode="vector", level="chunks", k=50))


# Modes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["propositions", "chunks"])
def test_full_text_search_finds_the_matching_rows(index, level):
    results = search(index, "zebras", None, level=level, mode="fts", k=5)
    assert (["beta:c1"], True) == (ids(results), all(r.score > 0 for r in results))


def test_full_text_query_syntax_characters_are_plain_text(index):
    results = search(index, 'it\'s "zebras" AND OR (', None, level="chunks", mode="fts", k=5)
    assert ["beta:c1"] == ids(results)


def test_hybrid_is_reciprocal_rank_fusion_of_vector_and_text_rankings(index):
    query = unit([0.2, 0.1, 0.1, 0, 1.0, 0, 0, 0])
    vector = ids(search(index, "owls honey", query, level="chunks", mode="vector", k=4))
    text = ids(search(index, "owls honey", None, level="chunks", mode="fts", k=4))
    expected: dict[str, float] = {}
    for ranking in (vector, text):
        for rank, chunk_id in enumerate(ranking, start=1):
            expected[chunk_id] = expected.get(chunk_id, 0.0) + 1 / (RRF_K + rank)
    hybrid = search(index, "owls honey", query, level="chunks", mode="hybrid", k=4)
    assert (sorted(expected, key=lambda c: -expected[c]), pytest.approx(expected)) == (
        ids(hybrid), {r.chunk_id: r.score for r in hybrid})


def test_reciprocal_rank_fusion_sums_reciprocal_ranks():
    fused = reciprocal_rank_fusion(
        [[{"id": "a"}, {"id": "b"}], [{"id": "b"}, {"id": "c"}]], key=lambda r: r["id"], k=60)
    assert [("b", 1 / 62 + 1 / 61), ("a", 1 / 61), ("c", 1 / 62)] == [
        (r["id"], pytest.approx(r["score"])) for r in fused]


@pytest.mark.parametrize("level", ["propositions", "chunks", "both"])
def test_a_query_vector_given_as_a_function_is_computed_once_and_gives_the_same_results(
        index, level):
    query = unit([0.2, 0.1, 0.1, 0, 1.0, 0, 0, 0])
    calls = []

    def embed() -> np.ndarray:
        calls.append(1)
        return query

    lazy = search(index, "owls honey", embed, level=level, mode="hybrid", k=4)
    eager = search(index, "owls honey", query, level=level, mode="hybrid", k=4)
    assert ([r.to_dict() for r in eager], 1) == ([r.to_dict() for r in lazy], len(calls))


def test_a_full_text_search_never_computes_the_query_vector(index):
    def embed() -> np.ndarray:
        raise AssertionError("full-text search embedded the query")

    assert ["alpha:c0"] == ids(search(index, "owls", embed, level="chunks", mode="fts", k=1))


def test_an_error_in_one_concurrent_ranking_reaches_the_caller(index):
    def embed() -> np.ndarray:
        raise RuntimeError("embedding endpoint down")

    with pytest.raises(RuntimeError, match="embedding endpoint down"):
        search(index, "owls", embed, level="both", mode="hybrid")


def test_vector_search_without_a_vector_is_refused(index):
    with pytest.raises(ValueError, match="needs a query vector"):
        search(index, "owls", None, mode="hybrid")


# Filters --------------------------------------------------------------------------------
@pytest.mark.parametrize(("filters", "expected_docs"), [
    ({"doc_ids": ["beta"]}, {"beta"}),
    ({"doc_ids": ["alpha", "beta"]}, {"alpha", "beta"}),
    ({"source_glob": "*.txt"}, {"beta"}),
    ({"source_glob": "/corpus/reports/*"}, {"alpha"}),
    ({"source_glob": "*alpha report.pdf", "doc_ids": ["alpha"]}, {"alpha"}),
    ({"source_glob": "*.txt", "doc_ids": ["alpha"]}, set()),
    ({"doc_ids": ["it's \"odd\"; DROP"]}, set()),
    ({"source_glob": "*' OR '1'='1*"}, set()),
    ({"doc_ids": []}, set()),
])
def test_filters_restrict_results_to_the_matching_documents(index, filters, expected_docs):
    results = search(index, "", axis(0), mode="vector", level="both", k=10, **filters)
    assert expected_docs == {r.doc_id for r in results}


# Live rows only -------------------------------------------------------------------------
def test_uncommitted_rows_are_never_returned(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    index.replace_document(*alpha("r1").rows)
    newer = make_version("alpha", "r2", ["Replacement text that is not committed."],
                         source=ALPHA_SOURCE, chunk_vectors={0: axis(5)},
                         prop_vectors={(0, 0): axis(5), (0, 1): axis(5)})
    index._append_rows(index.prepare_replacement(*newer.rows))
    texts = {r.chunk_text for r in search(index, "", axis(5), mode="vector", level="both", k=10)}
    assert {"Owls hunt small mammals at night.", "Foxes dig dens in sandy soil."} == texts


@pytest.mark.parametrize("level", ["propositions", "chunks"])
def test_stale_rows_crowding_the_top_do_not_hide_live_ones(tmp_path, level):
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    index.replace_document(*make_version("crowd", "r1", ["The one live paragraph."],
                                         chunk_vectors={0: axis(1)},
                                         prop_vectors={(0, 0): axis(1), (0, 1): axis(1)}).rows)
    paragraphs = [f"Stale paragraph {i}." for i in range(80)]
    stale = make_version("crowd", "r2", paragraphs,
                         chunk_vectors={i: axis(0) for i in range(80)},
                         prop_vectors={(i, j): axis(0) for i in range(80) for j in range(2)})
    index._append_rows(index.prepare_replacement(*stale.rows))
    results = search(index, "", axis(0), mode="vector", level=level, k=1)
    assert ["The one live paragraph."] == [r.chunk_text for r in results]


# Empty and missing databases ------------------------------------------------------------
@pytest.mark.parametrize("level", ["propositions", "chunks", "both"])
@pytest.mark.parametrize("mode", ["vector", "fts", "hybrid"])
def test_a_missing_database_gives_no_results_and_stays_missing(tmp_path, level, mode):
    path = tmp_path / "nothing-here"
    results = search(Index.open(str(path)), "owls", np.ones(DIM, dtype=np.float32),
                     level=level, mode=mode)
    assert ([], False) == (results, path.exists())


def test_an_index_with_only_failed_documents_gives_no_results(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    index.record_failure({"doc_id": "d", "source": "/corpus/d.pdf", "status": "failed",
                          "error": "encrypted"})
    assert [] == search(index, "owls", axis(0), level="both", mode="hybrid")


def test_search_does_not_import_prefect():
    code = ("import sys, propdex.search, propdex.store; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'prefect'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == out.stdout.strip()



def a_result() -> SearchResult:
    return SearchResult(
        text="t", score=0.5, level="proposition", doc_id="d", chunk_id="d:c0",
        prop_id="d:c0:p0", chunk_text="c", header="h", section=None, title="T",
        source="/s.pdf", page_start=1, page_end=2, char_start=0, char_end=9,
        propositions=[{"prop_id": "d:c0:p0", "text": "t", "score": 0.5}])


def test_a_result_dict_holds_every_field():
    result = a_result()
    assert dataclasses.asdict(result) == result.to_dict()


def test_a_result_dict_holds_copies_of_the_propositions():
    result = a_result()
    result.to_dict()["propositions"][0]["score"] = 0.0
    assert 0.5 == result.propositions[0]["score"]


@pytest.mark.parametrize("option, default", [("level", DEFAULT_LEVEL), ("mode", DEFAULT_MODE), ("k", DEFAULT_K)])
def test_the_search_help_names_the_default_the_search_applies(option, default):
    from propdex.cli import build_parser

    search_parser = build_parser()._subparsers._group_actions[0].choices["search"]
    [action] = [a for a in search_parser._actions if a.dest == option]
    assert f"(default: {default})" in action.help
