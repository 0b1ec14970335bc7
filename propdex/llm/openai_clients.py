"""The process's ``openai`` clients: one per server, key and timeout, shared by every thread.

An ``openai.OpenAI`` client holds an HTTP connection pool. Built per document (an embedder, a
sectioning or chunking request set), each would open its own connections, a TLS handshake
each against a real server, and leave them to the garbage collector. Shared, a run keeps a
few connections alive across its documents; the sync client is thread-safe and its pool
serves the task threads at once.

The clients are closed at exit, while the modules they need are still there: left to the
interpreter's teardown, a client's finalizer can run once httpx's module globals are gone
and print "'NoneType' object has no attribute 'CLOSED'". A client closed by its user (a test,
a benchmark) is replaced at the next request.
"""

from __future__ import annotations

import atexit
import threading

import openai

from propdex.llm.live_sockets import trace_connections
from propdex.settings import Settings

_lock = threading.Lock()
_clients: dict[tuple[str, str, float], openai.OpenAI] = {}


def shared_openai_client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    """The process's client for ``base_url`` with ``api_key`` and ``timeout``; a new one when
    none was made yet or the last one was closed (``close_openai_clients``)."""
    key = (base_url, api_key, timeout)
    with _lock:
        client = _clients.get(key)
        if client is None or client.is_closed():
            if not _clients:
                atexit.register(close_openai_clients)  # unregistered by close_openai_clients
            # Retries are propdex's own (propdex.llm.client), so the client's are off.
            # Its connections are noted, so that a stopped run cuts their requests in flight.
            http_client = openai.DefaultHttpxClient(event_hooks={"request": [trace_connections]})
            client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout,
                                   http_client=http_client)
            _clients[key] = client
        return client


def close_openai_clients() -> None:
    """Close every shared client: their connections end now; later calls get new clients."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
        atexit.unregister(close_openai_clients)
    for client in clients:
        client.close()


class SharedClientUser:
    """What sends requests to ``base_url`` with the key ``_secret`` and ``settings``'
    timeout, through the process's shared client."""

    base_url: str
    _secret: str
    settings: Settings

    @property
    def _client(self) -> openai.OpenAI:
        return shared_openai_client(self.base_url, self._secret, self.settings.llm_timeout)

    def close(self) -> None:
        """Close the process's client to this server: a test's or a benchmark's clean-up
        (the next request opens a new client)."""
        self._client.close()
