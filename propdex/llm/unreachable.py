"""Servers this process knows to be unreachable, so that a run against a server that is not
there fails in seconds instead of document by document.

Once one request to a server has spent its attempts failing to connect (connection refused,
a host name that does not resolve, a connect timeout), the server is marked: every later
request to it, from any thread, fails at once with ``LLMServerUnreachableError`` naming the
server and the cause, and requests still retrying stop at their next attempt. A 5xx answer,
a 429 or a read timeout comes from a server that is there: none of them marks it.

A mark lasts ``llm_unreachable_cooldown_s``. Then a single request is let through as a
trial, with one attempt, while the others still fail at once: an answer of any kind clears
the mark, a connection failure renews it. So a long-lived process (``propdex serve``, a
served deployment, ``propdex watch``) uses a server again at most a cooldown after it came
back, and an ingest run starts with no marks (``forget_unreachable_servers``).

A few lines keyed by base URL rather than a circuit-breaker library (pybreaker 1.4): it would
need a breaker per URL and a rule excluding every failure but a connect failure, and its
open-circuit error carries no cause, nor can it stop a request already in its retries: that
is most of what these lines do.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from propdex.errors import LLMServerUnreachableError


@dataclass
class Mark:
    message: str  # the error every request refused meanwhile raises
    until: float  # time.monotonic() when a trial request may go
    trial: bool = False  # a trial request is in flight


_lock = threading.Lock()
_marks: dict[str, Mark] = {}


class Admission:
    """What a request to a server may do: ``trial`` is one attempt that decides the mark."""

    def __init__(self, base_url: str, trial: bool):
        self.base_url = base_url
        self.trial = trial


def admit(base_url: str) -> Admission:
    """Let a request to ``base_url`` go, as a trial when its mark has expired; raise
    ``LLMServerUnreachableError`` when the server is marked and no trial is due."""
    with _lock:
        mark = _marks.get(base_url)
        if mark is None:
            return Admission(base_url, trial=False)
        if mark.trial or time.monotonic() < mark.until:
            raise LLMServerUnreachableError(mark.message)
        mark.trial = True
        return Admission(base_url, trial=True)


def check_reachable(base_url: str) -> None:
    """Raise the mark's error when ``base_url`` was marked meanwhile (a request between two
    attempts: another one found the server gone)."""
    with _lock:
        mark = _marks.get(base_url)
    if mark is not None:
        raise LLMServerUnreachableError(mark.message)


def mark_unreachable(base_url: str, message: str, cooldown: float) -> LLMServerUnreachableError:
    """Mark ``base_url`` unreachable for ``cooldown`` seconds; the error to raise."""
    with _lock:
        _marks[base_url] = Mark(message, time.monotonic() + cooldown)
    return LLMServerUnreachableError(message)


def end_trial(admission: Admission, *, answered: bool) -> None:
    """End a trial that did not renew the mark: a server that answered (whatever it answered)
    is there, so its mark goes; a trial that never reached it (the run stopping, the
    document's deadline) leaves the next request to try."""
    if not admission.trial:
        return
    with _lock:
        mark = _marks.get(admission.base_url)
        if mark is None or not mark.trial:
            return
        if answered:
            del _marks[admission.base_url]
        else:
            mark.trial = False


def forget_unreachable_servers() -> None:
    """Forget every mark: a new run tries each server afresh."""
    with _lock:
        _marks.clear()
