"""A LlamaIndex retriever over a propdex index (extra ``llama-index``: llama-index-core).

    from propdex.integrations.llama_index import PropdexRetriever

    retriever = PropdexRetriever(db="propdex-db", k=4, where={"team": "research"})
    nodes = retriever.retrieve("What are the levels of AGI?")
    nodes[0].score, nodes[0].node.text, nodes[0].node.metadata["source"]

Each NodeWithScore holds a TextNode whose text is the result's text (the best proposition,
or the chunk), whose start_char_idx/end_char_idx are the cited chunk's offsets in the
document's text, and whose metadata is the citation (propdex.integrations.searches.citation).
"""

from __future__ import annotations

from propdex.integrations.searches import Searcher, citation, missing_extra
from propdex.metadata import MetadataInput
from propdex.search import DEFAULT_K, DEFAULT_LEVEL, DEFAULT_MODE, Level, Mode

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:
    raise missing_extra("llama-index", exc) from exc


class PropdexRetriever(BaseRetriever):
    """Nodes from a propdex index: the local one at ``db`` (default PROPDEX_DB), or a running
    `propdex serve` at ``url``."""

    def __init__(self, db: str | None = None, url: str | None = None, *,
                 token: str | None = None, k: int = DEFAULT_K, level: Level = DEFAULT_LEVEL,
                 mode: Mode = DEFAULT_MODE, where: MetadataInput | None = None, **kwargs):
        self.k, self.level, self.mode, self.where = k, level, mode, where
        self._searcher = Searcher(db, url, token)
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = self._searcher.search(query_bundle.query_str, k=self.k, level=self.level,
                                        mode=self.mode, where=self.where)
        return [NodeWithScore(node=_node(r), score=r["score"]) for r in results]


def _node(result: dict) -> TextNode:
    cited = citation(result)
    # The chunk and prop ids name the text: the same hit gets the same node id every time.
    return TextNode(id_=result["prop_id"] or result["chunk_id"], text=result["text"],
                    start_char_idx=result["char_start"], end_char_idx=result["char_end"],
                    metadata=cited,
                    # The citation is for the application; an LLM reading the node gets
                    # the text without it.
                    excluded_llm_metadata_keys=list(cited), excluded_embed_metadata_keys=list(cited))
