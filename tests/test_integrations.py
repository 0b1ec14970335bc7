"""The LangChain and LlamaIndex retrievers: langchain-tests' standard retriever suite, the
citation each result carries, metadata filters, and a running service as the index."""

from __future__ import annotations

import subprocess
import sys

import pytest

from propdex.metadata import entries, parse_pairs, to_json
from propdex.store import Index
from tests.service_harness import REPO, embedding_environment, running_service, version
from tests.store_rows import DIM

FACTS = {
    "owls": (["Owls hunt small mammals at night.", "Owls nest in old trees."],
             ["Barn owls hunt over fields.", "Owls swallow prey whole."], ["team=birds"]),
    "foxes": (["Foxes hunt voles in the snow.", "Foxes dig dens."],
              ["Red foxes hunt at dusk.", "Foxes eat berries."], ["team=mammals", "year=2024"]),
}


def documents():
    for doc_id, (first, second, pairs) in FACTS.items():
        v = version(doc_id, "r1", [first, second], f"/corpus/{doc_id}.md", doc_id.title())
        meta = parse_pairs(pairs, "test")
        v.document.update(metadata=to_json(meta), meta=entries(meta))
        yield v.rows


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("integrations") / "db"
    index = Index.open(str(path), dim=DIM)
    for rows in documents():
        index.replace_document(*rows)
    return str(path)


@pytest.fixture
def embedding_env(scripted, monkeypatch):
    for name, value in embedding_environment(scripted).items():
        monkeypatch.setenv(name, value)


# LangChain ------------------------------------------------------------------------------
langchain_tests = pytest.importorskip(
    "langchain_tests.integration_tests",
    reason="langchain-tests is not installed (pip install 'propdex[test]')")


class TestLangChainStandard(langchain_tests.RetrieversIntegrationTests):
    index_db: str = ""

    @pytest.fixture(autouse=True)
    def _index(self, db, embedding_env):
        type(self).index_db = db

    @property
    def retriever_constructor(self):
        from propdex.integrations.langchain import PropdexRetriever

        return PropdexRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"db": self.index_db, "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "Which animals hunt?"


def test_langchain_documents_carry_the_citation_and_document_metadata(db, embedding_env):
    from propdex.integrations.langchain import PropdexRetriever

    doc = PropdexRetriever(db=db, k=1, where={"team": "mammals"}).invoke(
        "Foxes hunt voles in the snow.")[0]
    assert ("Foxes hunt voles in the snow.", {
        "source": "/corpus/foxes.md", "title": "Foxes", "page_start": 1, "page_end": 1,
        "char_start": 0, "char_end": 45, "doc_id": "foxes", "chunk_id": "foxes:c0",
        "prop_id": "foxes:c0:p0", "level": "proposition", "section": "Section 0",
        "chunk_text": "Foxes hunt voles in the snow. Foxes dig dens.",
        "document_metadata": {"team": "mammals", "year": "2024"}}) == (
        doc.page_content, {k: v for k, v in doc.metadata.items() if k != "score"})


def test_langchain_where_finds_nothing_for_an_unknown_value(db, embedding_env):
    from propdex.integrations.langchain import PropdexRetriever

    assert [] == PropdexRetriever(db=db, where={"team": "fish"}).invoke("hunt")


def test_langchain_through_a_running_service_gives_the_local_results(db, scripted, embedding_env):
    from pathlib import Path

    from propdex.integrations.langchain import PropdexRetriever

    local = PropdexRetriever(db=db, k=3, where={"team": "birds"}).invoke("Owls hunt")
    with running_service(Path(db), embedding_environment(scripted)) as url:
        remote = PropdexRetriever(url=url, k=3, where={"team": "birds"}).invoke("Owls hunt")
    assert ([d.metadata["chunk_id"] for d in local], 2) == (
        [d.metadata["chunk_id"] for d in remote], len(local))


def test_langchain_filters_on_a_number_as_the_service_does(db, embedding_env):
    from propdex.integrations.langchain import PropdexRetriever

    docs = PropdexRetriever(db=db, where={"year": 2024}).invoke("hunt")
    assert {"foxes"} == {d.metadata["doc_id"] for d in docs}


def test_a_bad_query_raises_the_same_error_through_db_and_url(db, scripted, embedding_env):
    from pathlib import Path

    from propdex.errors import SearchRequestError
    from propdex.integrations.langchain import PropdexRetriever

    raised = []
    with running_service(Path(db), embedding_environment(scripted)) as url:
        for retriever in (PropdexRetriever(db=db), PropdexRetriever(url=url)):
            with pytest.raises(SearchRequestError) as refused:
                retriever.invoke("   ")
            raised.append(str(refused.value).split(": ")[-2:])
    assert raised[0] == raised[1]


def test_a_retriever_takes_db_or_url_not_both(db):
    from propdex.integrations.langchain import PropdexRetriever

    with pytest.raises(ValueError, match="either db or url"):
        PropdexRetriever(db=db, url="http://127.0.0.1:1")


# LlamaIndex -----------------------------------------------------------------------------
def test_llama_index_nodes_carry_offsets_scores_and_the_citation(db, embedding_env):
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed")
    from llama_index.core.schema import NodeWithScore, TextNode

    from propdex.integrations.llama_index import PropdexRetriever

    hits = PropdexRetriever(db=db, k=2, level="propositions", mode="vector",
                            where={"team": "birds"}).retrieve("Barn owls hunt over fields.")
    first = hits[0]
    assert ([NodeWithScore, NodeWithScore], TextNode, "Barn owls hunt over fields.",
            (59, 111), "owls:c1:p0", {"team": "birds"}, ["owls", "owls"]) == (
        [type(h) for h in hits], type(first.node), first.node.text,
        (first.node.start_char_idx, first.node.end_char_idx), first.node.node_id,
        first.node.metadata["document_metadata"], [h.node.metadata["doc_id"] for h in hits])


# Without the extras ---------------------------------------------------------------------
@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("langchain", "langchain_core", "langchain"),
    ("llama_index", "llama_index", "llama-index"),
])
def test_a_missing_framework_names_the_extra(module, framework, extra):
    code = (f"import sys; sys.modules[{framework!r}] = None\n"
            f"import propdex.integrations.{module}")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert f"pip install 'propdex[{extra}]'" in done.stderr.splitlines()[-1]
