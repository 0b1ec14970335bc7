"""The Python API: open an index and query it in-process.

    from propdex.api import open_index

    index = open_index("propdex-db")
    for hit in index.search("What are the levels of AGI?", k=3):
        print(hit.score, hit.title, hit.page_start, hit.text)

``IndexReader`` is what every reader of the index goes through: `propdex search`, the HTTP
service, the MCP tools and this API all call ``IndexReader.search``, which embeds the query
with the index's embedder and calls propdex.search.search, so they return the same results.
Only committed versions are ever read. Searches rank through LanceDB
(propdex.search.rankings.LanceReader), the tables held open for the reader's lifetime; the
embedder is built on the first query that needs a vector (or by ``warm_up``) and kept. An
IndexReader is safe to share between threads.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from propdex.embed.query import query_settings
from propdex.errors import IndexNotFoundError
from propdex.metadata import MetadataInput, filter_entries
from propdex.search import DEFAULT_K, DEFAULT_LEVEL, DEFAULT_MODE, Level, Mode, SearchResult, search
from propdex.search.rankings import LanceReader
from propdex.service.bounds import checked_search
from propdex.settings import Settings
from propdex.store import Index
from propdex.store import predicates as p
from propdex.store.datasets import index_folder_missing
from propdex.store.schema import CHUNKS, PROPOSITIONS, TABLES

QUERY_VECTOR_CACHE = 1024  # query vectors kept per reader (1.5 KiB each)

log = logging.getLogger("propdex.search")

# What GET /documents lists per document: its state, description, counts and last run.
DOCUMENT_SUMMARY_FIELDS = (
    "doc_id", "source", "status", "error", "error_kind", "title", "summary", "page_count",
    "chunk_count", "proposition_count", "passed_count", "content_sha256", "run_id",
    "last_run_id", "ingested_at", "last_attempt_at", "metadata", "pdf_reader",
    "layout_fallback_pages",
)
CHUNK_FIELDS = ["chunk_id", "doc_id", "run_id", "ordinal", "text", "header", "section",
                "page_start", "page_end", "char_start", "char_end", "source", "prop_error",
                "boxes"]
PROPOSITION_FIELDS = ["prop_id", "ordinal", "text", "accuracy", "clarity", "completeness",
                      "conciseness", "passed", "reject_reason", "page_start", "page_end",
                      "boxes"]


class IndexReader:
    """Read access to one index: search, documents, chunks and health."""

    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()
        self.index = Index.open(self.settings.db_uri, create=False,
                                storage_options=self.settings.storage_options)
        self.reader = LanceReader(self.index.uri, self.settings.storage_options)
        self._embedder: Any = None
        self._embedder_lock = threading.Lock()
        # Agents and applications repeat queries; the vector of a query never changes for
        # one embedder.
        self._query_vector = functools.lru_cache(maxsize=QUERY_VECTOR_CACHE)(self._embed_query)
        # The last vector_left_out warning logged, with its documents table version: a
        # service searched throughout a re-embedding logs each new state, not every query.
        self._warned: tuple[int | None, str] | None = None

    # Queries -----------------------------------------------------------------------------
    @property
    def embedder(self) -> Any:
        """The configured embedder (propdex.runtime.embedder_for), built once."""
        if self._embedder is None:
            with self._embedder_lock:
                if self._embedder is None:
                    from propdex.runtime import embedder_for

                    self._embedder = embedder_for(query_settings(self.settings))
        return self._embedder

    def warm_up(self) -> None:
        """Load the embedder and open the index's tables now rather than on the first query."""
        self.embedder.embed_query("warm-up")
        self.reader.live_documents()

    def search(self, query: str, *, level: Level = DEFAULT_LEVEL, mode: Mode = DEFAULT_MODE,
               k: int = DEFAULT_K, doc_ids: list[str] | None = None,
               source: str | None = None,
               query_vector: Callable[[], np.ndarray | None] | None = None,
               where: MetadataInput | None = None,
               ) -> list[SearchResult]:
        """The top ``k`` results for ``query`` (see propdex.search.search); ``source`` is a
        glob over source paths, ``doc_ids`` restricts to those documents. ``query_vector``:
        a function giving the query's vector embedded elsewhere (propdex.embed.query's
        child), or None when that failed and the reader must embed it. ``where``: metadata
        every result's document must hold, key -> value or list of values, all of them
        (propdex.metadata). SearchRequestError when an argument is outside the bounds every
        surface shares (propdex.service.bounds: the service answers it with a 422);
        IndexNotFoundError when the index's folder does not exist (not created yet, or
        removed); StorageError when a table cannot be read; EmbedderMismatchError for a
        vector or hybrid search none of whose documents was embedded with the configured
        model (an index built with PROPDEX_EMBEDDER=e5-small searched without it). While
        only some were (an ingest with a new embedder under way), the others are searched by
        full text only, and each result's ``vector_left_out`` says so (also logged)."""
        checked_search(self.settings.api_max_query_chars, {
            "query": query, "level": level, "mode": mode, "k": k, "doc_ids": doc_ids,
            "source": source, "where": where})
        meta = filter_entries(where)
        self._require_index()
        rankings = self.reader.rankings()  # every ranking of this search reads this state
        # Embedded lazily: the full-text rankings start while the query is being embedded.
        vector = None if mode == "fts" else functools.partial(
            self._given_or_embedded, query, query_vector)
        # The configured model, not the embedder's name: naming it must not load the model
        # (a search whose documents are all of another model is refused before embedding).
        results = search(rankings, query, vector, level=level, mode=mode, k=k,
                         doc_ids=doc_ids, source_glob=source, meta=meta,
                         embed_model=self.settings.embed_model_name)
        if results and (left_out := results[0].vector_left_out) is not None:
            warned = (rankings.live_documents().version, left_out["warning"])
            if warned != self._warned:
                self._warned = warned
                log.warning("%s: %s", self.index.uri, left_out["warning"])
        return results

    def _require_index(self) -> None:
        """IndexNotFoundError when the index's folder does not exist: a service started
        before the first ingest, or a folder removed, is told apart from an empty index."""
        if index_folder_missing(self.index.uri):
            raise IndexNotFoundError(
                f"no index at {self.index.uri}: its folder does not exist (run `propdex "
                "ingest` to create it, or check the db setting)")

    def _given_or_embedded(self, query: str,
                           given: Callable[[], np.ndarray | None] | None) -> np.ndarray:
        vector = given() if given is not None else None
        return self._query_vector(query) if vector is None else vector

    def query_vector(self, query: str) -> np.ndarray:
        """The embedding of ``query`` (kept for the next QUERY_VECTOR_CACHE queries)."""
        return self._query_vector(query)

    def _embed_query(self, query: str) -> np.ndarray:
        vector = np.array(self.embedder.embed_query(query), dtype=np.float32)
        vector.flags.writeable = False  # shared by every search of this query (LRU above)
        return vector

    # Documents and chunks ------------------------------------------------------------------
    def documents(self) -> list[dict]:
        """Every document (indexed, failed or skipped), by source, without its text."""
        self._require_index()
        return [{k: row.get(k) for k in DOCUMENT_SUMMARY_FIELDS}
                for row in self.index.documents()]

    def document(self, doc_id: str) -> dict | None:
        """One document's full row without the extracted text, or None."""
        self._require_index()
        return self.index.document(doc_id, with_text=False)

    def chunk(self, chunk_id: str) -> dict | None:
        """A live chunk with its document's title and its propositions (with grades, in
        order), or None when no committed version holds it."""
        self._require_index()
        live = self.index.live_documents()
        rows = [r for r in self.index.read(CHUNKS, CHUNK_FIELDS, p.eq("chunk_id", chunk_id))
                if live.runs.get(r["doc_id"]) == r["run_id"]]
        if not rows:
            return None
        chunk = rows[0]
        where = p.all_of(p.eq("chunk_id", chunk_id), p.eq("run_id", chunk["run_id"]))
        propositions = sorted(self.index.read(PROPOSITIONS, PROPOSITION_FIELDS, where),
                              key=lambda r: r["ordinal"])
        return {**chunk, "title": live.documents[chunk["doc_id"]]["title"],
                "propositions": propositions}

    def health(self) -> dict:
        """The index's location, table versions and row counts, and the embedder (read as
        searches read: through the reader's tables); status "no index" while the index's
        folder does not exist."""
        tables = {name: self.reader.table_state(name) for name in TABLES}
        return {
            "status": "no index" if index_folder_missing(self.index.uri) else "ok",
            "db": self.index.uri,
            "versions": {name: t[0].version if t is not None else None
                         for name, t in tables.items()},
            "rows": {name: t[1] if t is not None else 0 for name, t in tables.items()},
            "live_documents": len(self.reader.live_documents().runs),
            "embedder": self.embedder.name, "dim": self.embedder.dim,
            "vector_index": {name: tables[name] is not None
                             and tables[name][0].probes is not None
                             for name in (CHUNKS, PROPOSITIONS)},
        }


def open_index(db: str | None = None, **settings: Any) -> IndexReader:
    """An IndexReader over the index at ``db`` (default PROPDEX_DB or ./propdex-db); other
    keyword arguments are Settings fields (embedder, embed_model, storage_* ...)."""
    if db is not None:
        settings["db"] = db
    return IndexReader(Settings(**settings))
