"""The Python API: open an index and query it in-process.

    from propdex.api import open_index

    index = open_index("propdex-db")
    for hit in index.search("What are the levels of AGI?", k=3):
        print(hit.score, hit.title, hit.page_start, hit.text)

``IndexReader`` is what every reader of the index goes through: `propdex search`, the HTTP
service, the MCP tools and this API all call ``IndexReader.search``, which embeds the query
with the index's embedder and calls propdex.search.search, so they return the same results.
Only committed versions are ever read. The embedder is built on the first query that needs
a vector (or by ``warm_up``) and kept; an IndexReader is safe to share between threads.
``resident=True`` (what `propdex serve` and `propdex mcp` use) searches the live rows held in
memory (propdex.resident) instead of querying LanceDB: the same results, in milliseconds.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import cachetools
import numpy as np
from cachetools import LRUCache

from propdex.embed.query import query_settings
from propdex.search import DEFAULT_K, DEFAULT_LEVEL, DEFAULT_MODE, Level, Mode, SearchResult, search
from propdex.settings import Settings
from propdex.store import Index
from propdex.store import predicates as p
from propdex.store.schema import CHUNKS, PROPOSITIONS, TABLES

if TYPE_CHECKING:
    from propdex.resident import ResidentIndex
    from propdex.store.dataset_rankings import DatasetRankings

QUERY_VECTOR_CACHE = 1024  # query vectors kept per reader (1.5 KiB each)

# What GET /documents lists per document: its state, description, counts and last run.
DOCUMENT_SUMMARY_FIELDS = (
    "doc_id", "source", "status", "error", "error_kind", "title", "summary", "page_count",
    "chunk_count", "proposition_count", "passed_count", "content_sha256", "run_id",
    "last_run_id", "ingested_at", "last_attempt_at",
)
CHUNK_FIELDS = ["chunk_id", "doc_id", "run_id", "ordinal", "text", "header", "section",
                "page_start", "page_end", "char_start", "char_end", "source", "prop_error"]
PROPOSITION_FIELDS = ["prop_id", "ordinal", "text", "accuracy", "clarity", "completeness",
                      "conciseness", "passed", "reject_reason", "page_start", "page_end"]


class IndexReader:
    """Read access to one index: search, documents, chunks and health."""

    def __init__(self, settings: Settings | None = None, *, resident: bool = False,
                 one_shot: bool = False):
        self.settings = settings or Settings()
        self.index = Index.open(self.settings.db_uri, create=False,
                                storage_options=self.settings.storage_options)
        # A one-shot reader (`propdex search`) reads through pylance and never imports
        # LanceDB: most of the command's start-up (propdex.store.datasets).
        self._one_shot: DatasetRankings | None = None
        if one_shot:
            from propdex.store.dataset_rankings import DatasetRankings

            self._one_shot = DatasetRankings(self.index.uri, self.settings.storage_options)
        # Long-running readers search the live rows held in memory (propdex.resident): the
        # same results, without four LanceDB queries per search.
        self.resident: ResidentIndex | None = None
        self._resident_search = threading.Lock()
        if resident:
            from propdex.resident import ResidentIndex

            self.resident = ResidentIndex(
                self.index, refresh_seconds=self.settings.serve_refresh_seconds)
        self._embedder: Any = None
        self._embedder_lock = threading.Lock()
        # Agents and applications repeat queries; the vector of a query never changes for
        # one embedder, and embedding it is a tenth of a search's CPU.
        self._query_vectors: LRUCache = LRUCache(maxsize=QUERY_VECTOR_CACHE)
        self._query_vector = cachetools.cached(self._query_vectors, key=lambda query: query,
                                               lock=threading.Lock())(self._embed_query)

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
        """Load the embedder and the live documents (and the resident rows) now rather than
        on the first query."""
        self.embedder.embed_query("warm-up")
        self.index.live_documents()
        if self.resident is not None:
            self.resident.view()

    def search(self, query: str, *, level: Level = DEFAULT_LEVEL, mode: Mode = DEFAULT_MODE,
               k: int = DEFAULT_K, doc_ids: list[str] | None = None,
               source: str | None = None,
               query_vector: Callable[[], np.ndarray | None] | None = None,
               ) -> list[SearchResult]:
        """The top ``k`` results for ``query`` (see propdex.search.search); ``source`` is a
        glob over source paths, ``doc_ids`` restricts to those documents. ``query_vector``:
        a function giving the query's vector embedded elsewhere (propdex.embed.query's
        child), or None when that failed and the reader must embed it."""
        if self.resident is None:
            # Embedded lazily: the full-text rankings start while the query is being embedded.
            vector = None if mode == "fts" else functools.partial(
                self._given_or_embedded, query, query_vector)
            return search(self._one_shot or self.index, query, vector, level=level, mode=mode,
                          k=k, doc_ids=doc_ids, source_glob=source)
        # Resident: the view (refreshed, if a commit landed, without holding up others) and
        # the query vector (ONNX Runtime, outside the GIL) first, then the search itself,
        # one at a time: it is Python and short NumPy calls, and 32 at once on threads
        # served 136 searches/s at 100k propositions against 220/s one after the other.
        view = self.resident.view()
        vector = None if mode == "fts" else self._given_or_embedded(query, query_vector)
        with self._resident_search:
            return search(view, query, vector, level=level, mode=mode, k=k, doc_ids=doc_ids,
                          source_glob=source)

    def _given_or_embedded(self, query: str,
                           given: Callable[[], np.ndarray | None] | None) -> np.ndarray:
        vector = given() if given is not None else None
        return self._query_vector(query) if vector is None else vector

    def query_vector(self, query: str) -> np.ndarray:
        """The embedding of ``query`` (kept for the next QUERY_VECTOR_CACHE queries)."""
        return self._query_vector(query)

    def has_query_vector(self, query: str) -> bool:
        """Whether ``query``'s vector is at hand, so that searching it embeds nothing."""
        return query in self._query_vectors

    def _embed_query(self, query: str) -> np.ndarray:
        vector = np.array(self.embedder.embed_query(query), dtype=np.float32)
        vector.flags.writeable = False  # shared by every search of this query (LRU above)
        return vector

    # Documents and chunks ------------------------------------------------------------------
    def documents(self) -> list[dict]:
        """Every document (indexed, failed or skipped), by source, without its text."""
        return [{k: row.get(k) for k in DOCUMENT_SUMMARY_FIELDS}
                for row in self.index.documents()]

    def document(self, doc_id: str) -> dict | None:
        """One document's full row without the extracted text, or None."""
        return self.index.document(doc_id, with_text=False)

    def chunk(self, chunk_id: str) -> dict | None:
        """A live chunk with its document's title and its propositions (with grades, in
        order), or None when no committed version holds it."""
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
        """The index's location, table versions and row counts, and the embedder."""
        versions, rows = {}, {}
        for name in TABLES:
            table = self.index.table(name)
            versions[name] = table.version if table is not None else None
            rows[name] = table.count_rows() if table is not None else 0
        return {
            "status": "ok", "db": self.index.uri, "versions": versions, "rows": rows,
            "live_documents": len(self.index.live_documents().runs),
            "embedder": self.embedder.name, "dim": self.embedder.dim,
            "vector_index": {name: self.index.has_vector_index(name)
                             for name in (CHUNKS, PROPOSITIONS)},
            "resident": self._resident_health(),
        }

    def _resident_health(self) -> dict | None:
        """What the resident index holds (None when searches go to LanceDB)."""
        if self.resident is None:
            return None
        view = self.resident.view()
        return {
            "documents_version": view.version,
            "rows": {name: state.live_rows for name, state in view.tables.items()},
            "segments": {name: len(state.segments) for name, state in view.tables.items()},
            "refresh_seconds": self.resident.refresh_seconds,
            "refreshes": self.resident.refreshes,
            "last_refresh_seconds": self.resident.last_refresh_seconds,
            "last_refresh_at": self.resident.last_refresh_at,
        }


def open_index(db: str | None = None, *, resident: bool = False,
               **settings: Any) -> IndexReader:
    """An IndexReader over the index at ``db`` (default PROPDEX_DB or ./propdex-db); other
    keyword arguments are Settings fields (embedder, embed_model, storage_* ...).
    ``resident=True`` loads the live rows into memory on the first search (or warm_up) and
    keeps them current: for an application that searches many times."""
    if db is not None:
        settings["db"] = db
    return IndexReader(Settings(**settings), resident=resident)
