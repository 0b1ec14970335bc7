"""`propdex serve`: check the bind address against the token, load the index, run uvicorn."""

from __future__ import annotations

import ipaddress
import sys
import time

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


def single_blas_thread() -> None:
    """One BLAS thread from now on. A resident search is a few small matrix products; with
    OpenBLAS's thread pool each woke the second core and spun on it, which measured as twice
    the CPU of a search (100k propositions: 7 -> 3.3 ms) that concurrent requests need.
    Called after the resident load, whose k-means does use both cores."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def serve(settings: Settings, host: str, port: int) -> None:
    """Serve the index of ``settings`` until interrupted. Raises UnsafeBindError first."""
    check_bind(host, settings)
    import uvicorn

    from propdex.api import IndexReader
    from propdex.service.app import create_app

    reader = IndexReader(settings, resident=settings.serve_engine == "memory")
    started = time.perf_counter()
    reader.warm_up()  # the embedder and the resident rows load now, not on the first request
    single_blas_thread()
    app = create_app(reader)
    auth = "bearer token required" if settings.api_token is not None else "no token"
    loaded = ""
    if reader.resident is not None:
        rows = reader.health()["resident"]["rows"]
        loaded = (f"; {rows['propositions']:,} propositions and {rows['chunks']:,} chunks "
                  f"in memory, loaded in {time.perf_counter() - started:.1f} s")
    print(f"propdex: serving {reader.index.uri} on http://{host}:{port} ({auth}; "
          f"API docs at /docs{loaded})", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
