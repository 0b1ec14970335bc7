"""Writer locks, across the threads of a process and across processes.

Document locks: a replacement reads the committed run_id, appends, commits and deletes
superseded rows; ``record_failure`` and ``sweep_uncommitted`` read the committed run_id and
write from it. Two writers of one document interleaving those steps could delete the rows
the other just committed, so writers of a document take its lock. Documents hash into a
fixed number of buckets (a few lock files, not one per document); two documents sharing a
bucket merely wait for each other.

The tables lock: creating a table or an index is not retried by LanceDB when two writers
race (the loser fails with a commit conflict), so those steps and optimize() take it.

Readers never lock. Local databases use ``flock`` on files in ``<db>/_locks/`` (two ingest
runs on one folder are safe); object-store URIs only get the in-process locks.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

BUCKETS = 64
_TABLES = "tables"

_registry_guard = threading.Lock()
_thread_locks: dict[tuple[str, str], threading.Lock] = {}


def bucket_of(doc_id: str) -> str:
    return f"{hashlib.sha256(doc_id.encode('utf-8')).digest()[0] % BUCKETS:02d}"


def _thread_lock(key: tuple[str, str]) -> threading.Lock:
    with _registry_guard:
        return _thread_locks.setdefault(key, threading.Lock())


class WriterLocks:
    def __init__(self, db_uri: str, folder: Path | None):
        self._db_uri = db_uri
        self._folder = folder  # None for object stores

    @contextmanager
    def documents(self, doc_ids: Iterable[str]) -> Iterator[None]:
        """Hold the locks of every given document; buckets are taken in ascending order,
        so two holders of overlapping sets cannot deadlock."""
        with ExitStack() as stack:
            for bucket in sorted({bucket_of(d) for d in doc_ids}):
                stack.enter_context(self._named(bucket))
            yield

    def tables(self):
        return self._named(_TABLES)

    @contextmanager
    def _named(self, name: str) -> Iterator[None]:
        with _thread_lock((self._db_uri, name)):
            if self._folder is None:
                yield
                return
            self._folder.mkdir(exist_ok=True)  # inside the database folder, never creating it
            fd = os.open(self._folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the flock
