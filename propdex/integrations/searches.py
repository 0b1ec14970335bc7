"""What both retrievers share: one search, in-process or through a running service, and the
citation each result becomes.

The search is IndexReader.search (an index opened once per retriever and kept) or POST
/search of a `propdex serve` at ``url``, so a retriever returns what `propdex search` returns.
"""

from __future__ import annotations

import threading
from typing import Any

from propdex.errors import PropdexError
from propdex.metadata import MetadataInput, filter_entries

# The result fields a citation carries, as the search gives them; "boxes" only where the
# index holds layout boxes, "vector_left_out" only while it is being re-embedded.
CITATION_FIELDS = ("source", "title", "page_start", "page_end", "char_start", "char_end",
                   "doc_id", "chunk_id", "prop_id", "score", "level", "section", "chunk_text")
OPTIONAL_FIELDS = ("boxes", "vector_left_out")


class IntegrationUnavailableError(PropdexError, ImportError):
    """A retriever's framework is not installed: the message names the extra to install."""


def missing_extra(extra: str, exc: ImportError) -> IntegrationUnavailableError:
    return IntegrationUnavailableError(
        f"this retriever needs the '{extra}' extra: pip install 'propdex[{extra}]' "
        f"(missing: {exc.name})")


class ConfigurationError(PropdexError, ValueError):
    """A retriever given both ``db`` and ``url``."""


class Searcher:
    """Searches one index, opened on first use: the local one at ``db`` (default PROPDEX_DB),
    or the service at ``url``. Thread-safe."""

    def __init__(self, db: str | None, url: str | None, token: str | None):
        if db is not None and url is not None:
            raise ConfigurationError("give a retriever either db or url, not both")
        self.db, self.url, self.token = db, url, token
        self._reader: Any = None
        self._lock = threading.Lock()

    def reader(self) -> Any:
        if self._reader is None:
            with self._lock:
                if self._reader is None:
                    from propdex.api import open_index

                    self._reader = open_index(self.db)
        return self._reader

    def search(self, query: str, *, k: int, level: str, mode: str,
               where: MetadataInput | None) -> list[dict]:
        """The results as `propdex search --json` gives them."""
        filter_entries(where)  # a bad filter fails here, the same way for db and url
        if self.url is not None:
            from propdex.service.client import search_via_service

            return search_via_service(self.url, {"query": query, "k": k, "level": level,
                                                 "mode": mode, "where": where or None},
                                      self.token)
        return [r.to_dict() for r in self.reader().search(query, k=k, level=level,  # type: ignore[arg-type]
                                                          mode=mode, where=where)]  # type: ignore[arg-type]


def citation(result: dict) -> dict:
    """A result's citation: where its text is in which document, and the document's
    metadata (under "document_metadata", so a key of it never hides a citation field)."""
    cited = {name: result.get(name) for name in CITATION_FIELDS}
    cited.update({name: result[name] for name in OPTIONAL_FIELDS if result.get(name)})
    cited["document_metadata"] = result.get("metadata") or {}
    return cited
