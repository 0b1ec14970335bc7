"""Which documents are live: the committed run of each, cached per documents table version.

Every search must know each document's committed run to skip old and unfinished rows.
Reading the whole documents table for that costs milliseconds per query at 10k documents
(and grows with the index), while asking LanceDB for the table's current version costs a
tenth of a millisecond. So the map is read once per version: a commit, a failure record or a
removal writes a new version of the documents table, and the next query re-reads the map.

The version is taken *before* the rows are read. A commit landing in between gives a map
newer than its key, never older: the next query sees a newer version and reads again, and a
map can only be fresher than the rows it filters, so an uncommitted run is never let through.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

LIVE_COLUMNS = ["doc_id", "run_id", "title", "source", "metadata", "embed_model"]


def vector_space(embed_model: str) -> str:
    """The vector space an embedding model's name puts its vectors in: int8 MiniLM documents
    are searched with fp32 query vectors by design (cosine >= 0.999 to fp32's), so
    "all-MiniLM-L6-v2-int8" and "all-MiniLM-L6-v2" share one; any other name is its own."""
    return embed_model.removesuffix("-int8")


@dataclass(frozen=True)
class VectorSplit:
    """The live documents a vector ranking with one embedding model searches, and those it
    leaves out because another model's vectors stand for them."""

    # The embed_model values of the rows it searches (None among them: rows that recorded no
    # model); None: every row, the index holding no other vector space.
    embed_models: tuple[str | None, ...] | None
    searched: int  # documents of the scope in the model's vector space (or of no model)
    left_out: dict[str, int]  # embed_model -> documents of the scope it embedded, not searched

    @property
    def scope(self) -> int:
        return self.searched + sum(self.left_out.values())


@dataclass(frozen=True)
class LiveDocuments:
    """One version's live documents. Shared between threads: never modify its dicts."""

    version: int | None  # documents table version it was read at; None = no table
    documents: dict[str, dict] = field(default_factory=dict)  # doc_id -> LIVE_COLUMNS
    runs: dict[str, str] = field(default_factory=dict)  # doc_id -> committed run_id

    @classmethod
    def of_rows(cls, version: int, rows: list[dict]) -> LiveDocuments:
        """The live documents among documents ``rows`` (LIVE_COLUMNS) read at ``version``."""
        documents = {r["doc_id"]: r for r in rows if r["run_id"] is not None}
        return cls(version, documents, {doc_id: r["run_id"] for doc_id, r in documents.items()})

    @cached_property
    def embed_models(self) -> Counter[str]:
        """How many live documents each embedding model embedded; counted once per version,
        not per query (a vector search checks it). Rows that recorded no model are left out."""
        return Counter(model for row in self.documents.values() if (model := row.get("embed_model")))

    def embedded_elsewhere(self, embed_model: str) -> dict[str, int]:
        """The embedding models, other than ``embed_model``'s vector space, that live
        documents were embedded with, and how many documents each."""
        space = vector_space(embed_model)
        return {model: n for model, n in self.embed_models.items() if vector_space(model) != space}

    def vector_split(self, embed_model: str, doc_ids: list[str] | None) -> VectorSplit:
        """Which of the live documents ``doc_ids`` (None: every one) a vector ranking with
        ``embed_model`` searches: those embedded in its vector space, or with no model
        recorded; while an ingest with another embedder re-embeds the index, the rest are
        left out. Made from embed_models, counted once per version, without a pass over the
        documents, but for a search restricted to ``doc_ids``, whose models are looked up."""
        elsewhere = self.embedded_elsewhere(embed_model)
        if not elsewhere:
            return VectorSplit(None, len(self.runs if doc_ids is None else doc_ids), {})
        models = tuple(sorted(m for m in self.embed_models if m not in elsewhere))
        models += (None,) if len(self.documents) > self.embed_models.total() else ()
        if doc_ids is None:
            return VectorSplit(models, len(self.documents) - sum(elsewhere.values()), elsewhere)
        of_scope = Counter(self.documents[doc_id].get("embed_model") for doc_id in doc_ids)
        left_out = {model: n for model, n in of_scope.items() if model in elsewhere}
        return VectorSplit(models, len(doc_ids) - sum(left_out.values()), left_out)


class LiveDocumentsCache:
    """The latest LiveDocuments of one documents table, re-read when its version changes."""

    def __init__(self, version: Callable[[], int | None], read: Callable[[int], list[dict]]):
        self._version = version  # the documents table's latest version; None: no table
        self._read = read  # every documents row with LIVE_COLUMNS as of a version or later
        self._lock = threading.Lock()
        self._current = LiveDocuments(None)

    def forget(self) -> None:
        """Drop the cached map: the documents table was replaced by one whose versions count
        from anew, so a version number seen before no longer names the same rows. Without
        the lock: it is called while the map is read, by the thread the read waits for."""
        self._current = LiveDocuments(None)

    def get(self) -> LiveDocuments:
        version = self._version()
        if version is None:
            return LiveDocuments(None)
        current = self._current
        if current.version == version:
            return current
        with self._lock:  # one reader refreshes; concurrent queries wait for its map
            latest = self._current.version
            if latest is not None and latest >= version:
                return self._current  # another thread read this version or a newer one
            fresh = LiveDocuments.of_rows(version, self._read(version))
            self._current = fresh
            return fresh
