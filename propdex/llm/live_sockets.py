"""The sockets of this process's connections to LLM and embedding servers, so that a stopped run
cuts the requests it has in flight (propdex.stopping).

Neither closing an ``openai`` client nor its HTTP client ends a request another thread is
waiting on: the waiting thread sits in the socket's ``recv`` until the answer or the timeout
(60-120 s against a slow server, past the 30 s a runner grants a cancelled flow). Shutting the
socket down does end it: ``recv`` returns at once, the HTTP layer reports the server gone
(openai's ``APIConnectionError``) and closes the connection. httpx's transport takes no network
backend of ours, so the sockets are learned through httpcore's public ``trace`` request
extension: its ``connect_tcp`` / ``start_tls`` events hand over each new connection's network
stream, whose ``get_extra_info("socket")`` is the socket. Every request of the shared clients
carries that extension (``trace_connections``, an httpx request event hook), so every
connection they open is known, in use or idle in their pools; idle ones cut with the rest are
found dead and replaced by the pool at their next use.
"""

from __future__ import annotations

import socket
import threading
import weakref
from typing import Any

from propdex.stopping import run_is_stopping

# httpcore's trace events whose return value is a connection's new network stream (TLS wraps
# the TCP socket in a new socket object, so both are noted).
_NEW_STREAM_EVENTS = (".connect_tcp.complete", ".connect_unix_socket.complete",
                      ".start_tls.complete")

_lock = threading.Lock()
# Weak: a connection its pool closed and dropped leaves the set with its socket.
_sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()


def shut_down(sock: socket.socket) -> None:
    """End every read and write on ``sock``, in any thread, without freeing its descriptor
    (closing it is its owner's business: a descriptor freed under a reading thread can be
    reused by another connection meanwhile)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed meanwhile, or never connected
        pass


def note_connection(event: str, info: dict[str, Any]) -> None:
    """httpcore's ``trace`` callback: keep the socket of each new connection; one opened while
    the run stops is cut at once (it was not there to be cut with the others)."""
    if not event.endswith(_NEW_STREAM_EVENTS):
        return
    sock = info["return_value"].get_extra_info("socket")
    if sock is None:
        return
    with _lock:
        _sockets.add(sock)
    # After the add: cut_connections sets the stop before it takes the lock, so a socket it
    # does not see is one this check sees stopped.
    if run_is_stopping():
        shut_down(sock)


def trace_connections(request: Any) -> None:
    """An httpx request event hook: the request's new connections are noted (``note_connection``)."""
    request.extensions["trace"] = note_connection


def cut_connections() -> None:
    """Shut down the socket of every connection the shared clients hold, its request in flight
    (if any) failing at once. Call it once the run is marked as stopping."""
    with _lock:
        sockets = list(_sockets)
    for sock in sockets:
        shut_down(sock)
