"""The per-document time limit (``document_timeout_s``).

A document's clock starts when its first stage starts in this process and every later
stage, LLM call and retry of that document runs against the same deadline. Prefect's task
``timeout_seconds`` cannot stop a thread, so the limit is enforced where the waiting
happens: extraction runs in a child process that is killed at the deadline
(``propdex.extract.isolated``), each LLM request's timeout is cut to the time left and no
retry starts after it (``propdex.llm.client``), and the wait for a document's chunk jobs
gives up at it (``propdex.pipeline.propositions``). The stage then raises
``DocumentTimeoutError`` and the run goes on with the other documents.

The deadline travels in a context variable; work handed to a thread pool must be submitted
through ``submit_with_deadline`` to keep it.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from propdex.errors import DocumentTimeoutError


@dataclass(frozen=True)
class Deadline:
    source: str
    at: float  # time.monotonic() value
    seconds: float  # the limit, for messages

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def expired(self, stage: str) -> DocumentTimeoutError:
        return DocumentTimeoutError(
            self.source, f"timed out: not done within document_timeout_s={self.seconds:g} s ({stage})"
        )

    def check(self, stage: str) -> None:
        if self.remaining() <= 0:
            raise self.expired(stage)


_current: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "propdex_document_deadline", default=None
)
_lock = threading.Lock()
_started: dict[tuple[str, str], Deadline] = {}  # (run key, doc_id) -> deadline


def current_deadline() -> Deadline | None:
    return _current.get()


def deadline_for(run_key: str, doc_id: str, source: str, seconds: float) -> Deadline | None:
    """The document's deadline in this run, started now when this is its first stage."""
    if seconds <= 0:
        return None
    with _lock:
        key = (run_key, doc_id)
        if key not in _started:
            _started[key] = Deadline(source, time.monotonic() + seconds, seconds)
        return _started[key]


def forget_run(run_key: str) -> None:
    """Drop the run's deadlines (a long-lived worker process serves many runs)."""
    with _lock:
        for key in [k for k in _started if k[0] == run_key]:
            del _started[key]


@contextmanager
def document_deadline(deadline: Deadline | None, stage: str) -> Iterator[Deadline | None]:
    """Run a stage under ``deadline``: refused at once when it has passed already."""
    if deadline is not None:
        deadline.check(stage)
    token = _current.set(deadline)
    try:
        yield deadline
    finally:
        _current.reset(token)


def submit_with_deadline(pool: Executor, fn: Callable[..., Any], *args: Any) -> Future:
    """``pool.submit`` that carries the caller's deadline into the worker thread."""
    return pool.submit(contextvars.copy_context().run, fn, *args)
