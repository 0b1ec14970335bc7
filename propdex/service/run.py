"""`propdex serve`: check the bind address against the token, load the index, run uvicorn."""

from __future__ import annotations

import gc
import ipaddress
import json
import os
import sys
import time
from typing import TYPE_CHECKING

from pydantic import SecretStr

from propdex.errors import PropdexError
from propdex.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from propdex.api import IndexReader


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


def freeze_loaded_objects() -> None:
    """Leave every object alive now -- the imports, the application, the loaded embedder --
    out of the garbage collector's full collections (``gc.freeze``), after one last
    collection so that no garbage is kept: a full collection walks every tracked object, and
    every request in flight would wait for it."""
    gc.collect()
    gc.freeze()


def loaded_reader(settings: Settings) -> IndexReader:
    """An IndexReader of ``settings`` with its embedder loaded and the index's tables open;
    reports on stderr when it is ready."""
    from propdex.api import IndexReader

    reader = IndexReader(settings)
    started = time.perf_counter()
    reader.warm_up()  # the embedder loads now, not on the first request
    print(f"propdex: process {os.getpid()} ready in {time.perf_counter() - started:.1f} s",
          file=sys.stderr, flush=True)
    return reader


# On asyncio's event loop even where uvloop is installed: with uvloop the connections of
# concurrent clients were served less evenly (bench/RESULTS.md).
UVICORN_OPTIONS = {"loop": "asyncio", "log_level": "warning", "access_log": False}


def worker_app() -> FastAPI:
    """The application of one of several worker processes (uvicorn imports this in each):
    its settings come from the environment, where serve() put the command line's."""
    from propdex.service.app import create_app

    app = create_app(loaded_reader(Settings()))
    freeze_loaded_objects()
    return app


def settings_environment(settings: Settings) -> dict[str, str]:
    """PROPDEX_* variables giving a new process the fields set explicitly on ``settings``
    (the command line's options; the rest it reads from the environment as this one did)."""
    environment = {}
    for name in settings.model_fields_set:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if value is None:
            continue
        environment[f"PROPDEX_{name.upper()}"] = (
            json.dumps(value) if isinstance(value, list | dict) else str(value))
    return environment


def serve(settings: Settings, host: str, port: int) -> int:
    """Serve the index of ``settings`` until interrupted; returns the exit status. Raises
    UnsafeBindError first. With ``serve_workers`` above 1, that many processes listen on the
    port (propdex.service.workers), each with its own reader (so a search is never held up
    by another's GIL, and each process can have a core)."""
    check_bind(host, settings)
    import uvicorn

    auth = "bearer token required" if settings.api_token is not None else "no token"
    workers = settings.serve_workers
    print(f"propdex: serving {settings.db_uri} on http://{host}:{port} ({auth}; "
          f"{workers} worker process{'es' if workers > 1 else ''}; API docs at /docs) once "
          f"the embedder is loaded",
          file=sys.stderr, flush=True)
    if workers > 1:
        from propdex.service.workers import REUSE_PORT, serve_workers

        os.environ.update(settings_environment(settings))  # the workers' Settings()
        if REUSE_PORT:
            return serve_workers(host, port, workers, UVICORN_OPTIONS)
        # Without SO_REUSEPORT (Windows), uvicorn's workers share one socket.
        uvicorn.run("propdex.service.run:worker_app", factory=True, workers=workers,
                    host=host, port=port, **UVICORN_OPTIONS)
        return 0
    from propdex.service.app import create_app

    app = create_app(loaded_reader(settings))
    freeze_loaded_objects()
    uvicorn.run(app, host=host, port=port, **UVICORN_OPTIONS)
    return 0
