"""Embedding a search query: its settings, and a one-shot embedding in a forked child.

Why a child: a one-shot `propdex search` imports LanceDB, then builds the ONNX session and
embeds the question; neither needs the other, but a thread cannot overlap them (imports hold
the import lock and the GIL). A process forked before LanceDB is imported embeds the question
on another core while the parent imports and opens the index, and the full-text rankings
start before its vector is read (bench/RESULTS.md has the figures).

This module imports neither LanceDB nor the embedder: the child imports the embedder.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable

import numpy as np

from propdex.embed.base import usable_cores
from propdex.settings import Settings

QUERY_THREADS = 2


def query_settings(settings: Settings) -> Settings:
    """The settings queries are embedded with: QUERY_THREADS ONNX Runtime threads (at most
    the cores this process may use) unless configured. A query is one short text: a second
    thread shortens it a little, more threads only wait on each other over so little work."""
    if settings.embedder == "minilm" and settings.embed_threads == 0:
        return settings.model_copy(update={"embed_threads": min(QUERY_THREADS, usable_cores())})
    return settings


def embed_query_in_child(settings: Settings, query: str,
                         ) -> Callable[[], np.ndarray | None] | None:
    """Start embedding ``query`` in a forked child process. Returns a function that waits
    for its vector, or gives None when the child failed (the caller then embeds the query
    itself, so that any error is raised where it is handled). Returns None at once when
    this process cannot fork safely: no os.fork (Windows), or other threads running (a fork
    copies only the calling thread, and locks other threads hold stay locked in the child)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    read_end, write_end = os.pipe()
    sys.stdout.flush()  # nothing buffered is written twice
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: embed, write the vector, and leave without cleanup
        status = 1
        try:
            os.close(read_end)
            from propdex.runtime import embedder_for

            vector = embedder_for(query_settings(settings)).embed_query(query)
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(np.asarray(vector, dtype=np.float32).tobytes())
            status = 0
        except BaseException:  # noqa: BLE001  the parent embeds again and reports it
            pass
        finally:
            os._exit(status)
    os.close(write_end)

    @functools.cache  # the pipe is read and the child waited for once
    def vector() -> np.ndarray | None:
        with os.fdopen(read_end, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        ok = status == 0 and data and len(data) % 4 == 0
        return np.frombuffer(data, dtype=np.float32) if ok else None

    return vector
