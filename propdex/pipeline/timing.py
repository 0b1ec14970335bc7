"""Seconds spent per stage per document, for the run artifact.

Tasks of one run share a process under the thread-pool runner, so a small locked registry
is enough; cached task runs record nothing, which is what they cost.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from contextlib import contextmanager

from propdex.cli import progress

_lock = threading.Lock()
_seconds: dict[str, dict[str, float]] = defaultdict(dict)


@contextmanager
def stage_timer(doc_id: str, stage: str):
    progress.stage_started(doc_id, stage)
    started = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - started
        with _lock:
            _seconds[doc_id][stage] = _seconds[doc_id].get(stage, 0.0) + elapsed


def pop_stage_seconds(doc_id: str) -> dict[str, float]:
    with _lock:
        return _seconds.pop(doc_id, {})
