"""Search while an index is re-embedded: documents of two embedders live side by side.

The index (service_harness.half_reembedded_index) holds "alpha", embedded with the model
this search embeds with, and "beta", still embedded with e5-small, as an ingest with a new
PROPDEX_EMBEDDER leaves the documents it has not reached yet.
"""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from propdex.api import open_index
from propdex.errors import EmbedderMismatchError
from propdex.integrations.searches import citation
from propdex.store import Index
from propdex.store.live import LiveDocuments
from tests.cli_capture import run_cli
from tests.service_harness import (
    E5,
    SEARCHED,
    embedding_environment,
    half_reembedded_index,
    running_service,
    version,
)


def hybrid_left_out(scope: int = 2) -> dict:
    return {"documents": 1, "embed_models": {E5: 1}, "searched_by_text": True,
            "warning": f"1 of the {scope} documents were searched by full text only: "
                       f"their vectors come from another model than this search's {SEARCHED!r} "
                       f"(1 with {E5!r}), which an ingest with this embedder replaces document "
                       "by document"}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("switch") / "db"
    half_reembedded_index(path)
    return path


@pytest.fixture
def reader(db, scripted, monkeypatch):
    for name, value in embedding_environment(scripted).items():
        monkeypatch.setenv(name, value)
    return open_index(str(db))


def test_a_vector_search_searches_the_documents_of_its_embedder_and_names_the_others(reader):
    hits = reader.search("Bees make honey from nectar.", mode="vector", k=5)
    assert ({"alpha"}, {"documents": 1, "embed_models": {E5: 1}, "searched_by_text": False}) == (
        {h.doc_id for h in hits},
        {key: value for key, value in hits[0].vector_left_out.items() if key != "warning"})


def test_a_vector_search_says_full_text_would_reach_the_others(reader):
    hits = reader.search("Owls nest in old trees.", mode="vector", level="chunks", k=1)
    assert ("1 of the 2 documents were not searched (a hybrid or full-text search "
            "reaches them): their vectors come from another model") == (
        hits[0].vector_left_out["warning"].split(" than ")[0])


def test_a_hybrid_search_finds_the_others_by_full_text(reader):
    hits = reader.search("Bees make honey from nectar.", mode="hybrid", level="chunks", k=5)
    assert ({"alpha": "by vector", "beta": "by text"}, hybrid_left_out()) == (
        {h.doc_id: "by text" if "honey" in h.text else "by vector" for h in hits},
        hits[0].to_dict()["vector_left_out"])


def test_a_search_of_documents_of_its_embedder_only_leaves_nothing_out(reader):
    hits = reader.search("Owls nest in old trees.", source="*alpha*", k=1)
    assert (["alpha"], None) == ([h.doc_id for h in hits], hits[0].vector_left_out)


def test_a_search_none_of_whose_documents_has_its_embedder_is_refused(reader, db):
    with pytest.raises(EmbedderMismatchError) as raised:
        reader.search("Bees make honey from nectar.", source="*beta*")
    assert (f"the index at {db} holds documents embedded with another model than this "
            f"search's {SEARCHED!r} (1 with {E5!r} of the 1 this search's filters allow)"
            ) == str(raised.value).split(": their vectors")[0]


def test_the_reader_logs_the_left_out_documents_once_per_index_state(reader, db, caplog):
    with caplog.at_level(logging.WARNING, logger="propdex.search"):
        for query in ("Bees make honey", "Owls hunt", "Honey keeps"):
            reader.search(query, level="chunks")
    assert [f"{db}: {hybrid_left_out()['warning']}"] == [r.getMessage() for r in caplog.records]


def test_cli_json_carries_the_field_and_stderr_the_warning(db, scripted, monkeypatch):
    for name, value in embedding_environment(scripted).items():
        monkeypatch.setenv(name, value)
    code, out, err = run_cli("search", "Bees make honey from nectar.", "--db", str(db), "--json")
    assert (0, hybrid_left_out(), f"propdex: warning: {hybrid_left_out()['warning']}\n") == (
        code, json.loads(out)[0]["vector_left_out"], err)


def test_the_service_answers_200_with_the_field(db, scripted):
    with running_service(db, embedding_environment(scripted)) as url:
        response = httpx.post(url + "/search", json={"query": "Bees make honey from nectar."})
    assert (200, {"alpha", "beta"}, hybrid_left_out()) == (
        response.status_code, {hit["doc_id"] for hit in response.json()},
        response.json()[0]["vector_left_out"])


def test_an_index_of_one_vector_space_is_searched_without_a_filter():
    # int8 and fp32 MiniLM are one space: no document is left out, no row filtered.
    live = LiveDocuments.of_rows(3, [
        {"doc_id": "a", "run_id": "r", "embed_model": "all-MiniLM-L6-v2"},
        {"doc_id": "b", "run_id": "r", "embed_model": "all-MiniLM-L6-v2-int8"}])
    split = live.vector_split("all-MiniLM-L6-v2-int8", None)
    assert (None, 2, {}) == (split.embed_models, split.searched, split.left_out)


def test_a_mixed_index_is_searched_by_the_models_of_the_querys_space():
    live = LiveDocuments.of_rows(3, [
        {"doc_id": "a", "run_id": "r", "embed_model": "all-MiniLM-L6-v2-int8"},
        {"doc_id": "b", "run_id": "r", "embed_model": E5},
        {"doc_id": "c", "run_id": "r", "embed_model": None}])
    split = live.vector_split("all-MiniLM-L6-v2", None)
    assert (("all-MiniLM-L6-v2-int8", None), 2, {E5: 1}) == (
        split.embed_models, split.searched, split.left_out)


def test_a_scoped_search_counts_the_documents_of_its_scope():
    live = LiveDocuments.of_rows(3, [
        {"doc_id": d, "run_id": "r", "embed_model": E5 if d in "bc" else SEARCHED}
        for d in "abcd"])
    split = live.vector_split(SEARCHED, ["a", "b"])
    assert ((SEARCHED,), 1, {E5: 1}) == (split.embed_models, split.searched, split.left_out)


@pytest.mark.parametrize("optimized", [False, True])  # the embed_model bitmap index, or none
def test_rows_of_no_recorded_model_are_searched_by_vector(tmp_path, scripted, monkeypatch,
                                                          optimized):
    half_reembedded_index(tmp_path / "db")
    gamma = version("gamma", "r1", [["Crows remember faces."]], "/corpus/gamma.md", "Gamma")
    for row in [gamma.document, *gamma.chunks, *gamma.propositions]:
        row["embed_model"] = None  # an index written before the model was recorded
    index = Index.open(str(tmp_path / "db"), dim=8)
    index.replace_document(*gamma.rows)
    if optimized:
        index.optimize()
    for name, value in embedding_environment(scripted).items():
        monkeypatch.setenv(name, value)
    hits = open_index(str(tmp_path / "db")).search("Crows remember faces.", mode="vector", k=5)
    assert ({"alpha", "gamma"}, 1) == (
        {h.doc_id for h in hits}, hits[0].vector_left_out["documents"])


def test_a_retrievers_citation_carries_the_field(reader):
    hits = reader.search("Bees make honey from nectar.", k=1)
    assert hybrid_left_out() == citation(hits[0].to_dict())["vector_left_out"]
