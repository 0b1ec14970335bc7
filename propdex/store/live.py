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

    searched: list[str] | None  # doc_ids in the model's vector space; None: all of the scope
    left_out: dict[str, int]  # embed_model -> documents of the scope it embedded, not searched
    scope: int  # documents in the scope


@dataclass(frozen=True)
class LiveDocuments:
    """One version's live documents. Shared between threads: never modify its dicts."""

    version: int | None  # documents table version it was read at; None = no table
    documents: dict[str, dict] = field(default_factory=dict)  # doc_id -> LIVE_COLUMNS
    runs: dict[str, str] = field(default_factory=dict)  # doc_id -> committed run_id
    # vector space -> its VectorSplit of every live document, made once per version
    _splits: dict[str, VectorSplit] = field(default_factory=dict, compare=False, repr=False)

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
        ``embed_model`` can search: those embedded in its vector space, or with no model
        recorded. While an ingest with another embedder re-embeds an index, the rest are
        left out. An index of one space (the usual case) costs a look at embed_models;
        a mixed one, a pass over the documents once per version, or over ``doc_ids``."""
        if not self.embedded_elsewhere(embed_model):
            return VectorSplit(None, {}, len(self.runs if doc_ids is None else doc_ids))
        space = vector_space(embed_model)
        if doc_ids is None and space in self._splits:
            return self._splits[space]
        searched, left_out = [], Counter()
        for doc_id in sorted(self.runs) if doc_ids is None else doc_ids:
            model = self.documents[doc_id].get("embed_model")
            if model is None or vector_space(model) == space:
                searched.append(doc_id)
            else:
                left_out[model] += 1
        split = VectorSplit(searched, dict(left_out), len(searched) + left_out.total())
        if doc_ids is None:
            self._splits[space] = split  # two threads may both make it: the same value
        return split


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
