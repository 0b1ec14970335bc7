"""A LangChain retriever over a propdex index (extra ``langchain``: langchain-core).

    from propdex.integrations.langchain import PropdexRetriever

    retriever = PropdexRetriever(db="propdex-db", k=4, where={"team": "research"})
    docs = retriever.invoke("What are the levels of AGI?")
    docs[0].page_content, docs[0].metadata["source"], docs[0].metadata["page_start"]

Each Document's page_content is the result's text (the best proposition, or the chunk), and
its metadata the citation (propdex.integrations.searches.citation). ``invoke(query, k=3)``
overrides ``k`` for one call.
"""

from __future__ import annotations

from typing import Any

from propdex.integrations.searches import Searcher, citation, missing_extra
from propdex.search import DEFAULT_K, DEFAULT_LEVEL, DEFAULT_MODE, Level, Mode
from propdex.service.bounds import MAX_K, Where

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:
    raise missing_extra("langchain", exc) from exc
from pydantic import Field, PrivateAttr


class PropdexRetriever(BaseRetriever):
    """Documents from a propdex index: the local one at ``db`` (default PROPDEX_DB), or a
    running `propdex serve` at ``url``."""

    db: str | None = Field(None, description="index folder or URI searched in-process")
    url: str | None = Field(None, description="base URL of a running `propdex serve`")
    token: str | None = Field(None, description="the service's PROPDEX_API_TOKEN, if it has one")
    k: int = Field(DEFAULT_K, ge=1, le=MAX_K, description=f"documents returned (1-{MAX_K})")
    level: Level = Field(DEFAULT_LEVEL, description="propositions, chunks or both")
    mode: Mode = Field(DEFAULT_MODE, description="vector, fts or hybrid")
    where: Where = None  # the filter POST /search takes: text, numbers or true/false
    _searcher: Searcher = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        self._searcher = Searcher(self.db, self.url, self.token)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        results = self._searcher.search(
            query, k=kwargs.get("k", self.k), level=kwargs.get("level", self.level),
            mode=kwargs.get("mode", self.mode), where=kwargs.get("where", self.where))
        return [Document(page_content=r["text"], metadata=citation(r)) for r in results]
