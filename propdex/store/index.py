"""The LanceDB index: documents, chunks and propositions, replaced one document at a time.

A document's replacement is atomic for readers (``replace_document``,
propdex.store.replacement): every read path accepts a chunk or proposition row only when its
(doc_id, run_id) is the one the documents row names, so a reader sees the old version until
the commit and the new one after it, and a crash between steps leaves the old version
searchable. The tables themselves are propdex.store.tables; their indexes and compaction
propdex.store.maintenance.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from propdex.store.consistency import Verification, verify_tables
from propdex.store.live import LIVE_COLUMNS, LiveDocumentsCache
from propdex.store.locks import WriterLocks
from propdex.store.maintenance import VECTOR_INDEX_THRESHOLD
from propdex.store.replacement import Replacements
from propdex.store.schema import CHUNKS, DOCUMENTS, PROPOSITIONS
from propdex.store.tables import absolute_uri, is_local

if TYPE_CHECKING:
    from propdex.search.rankings import LanceReader, Rankings


class Index(Replacements):
    """One LanceDB database. Thread-safe; open one per task or share one."""

    def __init__(self, uri: str, dim: int | None = None, *, create: bool = True,
                 vector_index_threshold: int = VECTOR_INDEX_THRESHOLD,
                 storage_options: dict[str, str] | None = None):
        self.uri = absolute_uri(uri)
        self.storage_options = storage_options  # object-store endpoint and credentials
        self.dim = dim
        self.create = create
        self.vector_index_threshold = vector_index_threshold
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._fts_checked: set[str] = set()
        self._migrated: set[str] = set()
        # Per table, its column names as searches last looked them up (one round trip).
        self._stored_names: dict[str, set[str]] = {}
        self._guard = threading.RLock()
        local = is_local(self.uri)
        self._locks = WriterLocks(self.uri, Path(self.uri) / "_locks" if local else None)
        self._reader: LanceReader | None = None
        self._live = LiveDocumentsCache(lambda: self.version(DOCUMENTS),
                                        lambda _version: self.read(DOCUMENTS, LIVE_COLUMNS))

    @classmethod
    def open(cls, uri: str, dim: int | None = None, *, create: bool = True,
             vector_index_threshold: int = VECTOR_INDEX_THRESHOLD,
             storage_options: dict[str, str] | None = None) -> Index:
        """Open the index at ``uri`` (a folder or an object-store URI). Nothing is created
        until the first write; with ``create=False`` a write that would need to create the
        database or a table raises StorageError instead."""
        return cls(uri, dim, create=create, vector_index_threshold=vector_index_threshold,
                   storage_options=storage_options)

    def rankings(self) -> Rankings:
        """What propdex.search ranks with: this index read by a LanceReader of its own, the
        same reads as every other reader's (propdex.search.rankings)."""
        from propdex.search.rankings import LanceReader  # it imports propdex.store

        with self._guard:
            if self._reader is None:
                self._reader = LanceReader(self.uri, self.storage_options)
        return self._reader.rankings()

    # Verification ----------------------------------------------------------------------
    def check(self) -> Verification:
        """The problems found between the tables and the documents ledger, and apart from
        them the leftovers of interrupted runs (rows no read sees, which the next ingest
        sweeps)."""
        documents = self.documents(with_text=True)
        chunks = self.read(CHUNKS, [
            "chunk_id", "doc_id", "run_id", "ordinal", "text", "char_start", "char_end",
            "page_start", "page_end", "source", "content_sha256",
        ])
        propositions = self.read(PROPOSITIONS, [
            "prop_id", "chunk_id", "doc_id", "run_id", "passed", "page_start", "page_end",
            "source", "content_sha256",
        ])
        return verify_tables(documents, chunks, propositions)

    def verify(self) -> list[str]:
        """Problems found between the tables and the documents ledger (empty = consistent);
        leftovers of interrupted runs are not problems (``check`` lists them)."""
        return self.check().problems
