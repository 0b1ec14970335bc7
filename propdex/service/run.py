"""`propdex serve`: check the bind address against the token, load the index, run uvicorn."""

from __future__ import annotations

import ipaddress
import sys

from propdex.errors import PropdexError
from propdex.settings import Settings


class UnsafeBindError(PropdexError):
    """A non-loopback address was asked for without PROPDEX_API_TOKEN."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_bind(host: str, settings: Settings) -> None:
    """Binding beyond this machine needs a token: the index would be open to the network."""
    if not is_loopback(host) and settings.api_token is None:
        raise UnsafeBindError(
            f"refusing to bind {host} without PROPDEX_API_TOKEN: set a token (every request "
            "must then send 'Authorization: Bearer <token>') or bind 127.0.0.1")


def serve(settings: Settings, host: str, port: int) -> None:
    """Serve the index of ``settings`` until interrupted. Raises UnsafeBindError first."""
    check_bind(host, settings)
    import uvicorn

    from propdex.api import IndexReader
    from propdex.service.app import create_app

    reader = IndexReader(settings)
    reader.warm_up()  # the embedder loads now, not on the first request
    app = create_app(reader)
    auth = "bearer token required" if settings.api_token is not None else "no token"
    print(f"propdex: serving {reader.index.uri} on http://{host}:{port} ({auth}; "
          f"API docs at /docs)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
