"""Servers this process knows to be unreachable, so that a run against a server that is not
there fails in seconds instead of document by document.

Once one request to a server has spent its attempts failing to connect (connection refused,
a host name that does not resolve, a connect timeout), the server is marked: every later
request to it, from any thread, fails at once with ``LLMServerUnreachableError`` naming the
server and the cause, and requests still retrying stop at their next attempt. A 5xx answer,
a 429 or a read timeout comes from a server that is there: none of them marks it.

While one request retries a server it failed to connect to (the probe), the other requests
that fail to connect to it wait for its verdict instead of retrying too: the run pays one
request's retries, however many documents were in flight. Marked, they fail with the mark's
error; when the probe ends otherwise they retry on their own as before.

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
from collections.abc import Callable
from dataclasses import dataclass

from propdex.errors import LLMServerUnreachableError


@dataclass
class Mark:
    message: str  # the error every request refused meanwhile raises
    until: float  # time.monotonic() when a trial request may go
    trial: bool = False  # a trial request is in flight


_lock = threading.Lock()
_marks: dict[str, Mark] = {}
# The request (a token of its call) retrying each server that refused it, and the condition
# its waiters wait on.
_probes: dict[str, object] = {}
_probe_ended = threading.Condition(_lock)
# How often a request waiting for a probe looks whether its run is stopping.
WAIT_POLL_SECONDS = 0.2


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
        _probe_ended.notify_all()
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


def await_probe(base_url: str, token: object, stopping: Callable[[], bool]) -> None:
    """After a connect failure of the request ``token``: return at once when it is (now) the
    server's probe, else wait for the probe's end (or ``stopping()``) and raise the mark's
    error when the probe marked the server."""
    with _lock:
        # Sent before the probe marked the server, failed after it: the mark answers it,
        # rather than a new probe's retries.
        if base_url not in _marks and _probes.setdefault(base_url, token) is token:
            return
        while base_url in _probes and base_url not in _marks and not stopping():
            _probe_ended.wait(WAIT_POLL_SECONDS)
        mark = _marks.get(base_url)
    if mark is not None:
        raise LLMServerUnreachableError(mark.message)


def end_probe(base_url: str, token: object) -> None:
    """The request ``token`` is done: when it was the server's probe, its waiters go on."""
    with _lock:
        if _probes.get(base_url) is token:
            del _probes[base_url]
            _probe_ended.notify_all()


def forget_unreachable_servers() -> None:
    """Forget every mark: a new run tries each server afresh."""
    with _lock:
        _marks.clear()
