"""Several service processes on one port, each listening on a socket of its own (SO_REUSEPORT).

Why not uvicorn's own workers: they share one listening socket, and a new connection goes to
whichever process happens to be waiting in accept() -- under load the one that is idle more
often, so the spread follows luck, not the number of processes, and keep-alive clients can
pile onto one worker while another idles (bench/RESULTS.md). With SO_REUSEPORT every process listens on its own socket and the kernel spreads new connections
over them by a hash of their addresses.

Each process builds its application (propdex.service.run.worker_app: settings from the
environment, the embedder loaded) before it listens, so none is sent a connection before
it can answer. When one exits, the others are stopped and the command exits with its status:
a supervisor (systemd, a container runtime) restarts the whole service.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import socket
import sys
from typing import Any

REUSE_PORT = hasattr(socket, "SO_REUSEPORT")  # Linux, macOS, the BSDs; not Windows


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) that other processes may bind as well."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    return sock


def run_worker(host: str, port: int, options: dict[str, Any]) -> None:
    """One worker process: load the index, then serve it on its own socket until stopped."""
    import uvicorn

    from propdex.service.run import worker_app

    app = worker_app()  # before listening: no connection waits on the index load
    sock = reuse_port_socket(host, port)
    uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[sock])


def serve_workers(host: str, port: int, workers: int, options: dict[str, Any]) -> int:
    """Run ``workers`` processes on (host, port) until one exits or this process is told to
    stop (SIGINT, SIGTERM); returns the exit status of the service: 0 when told to stop,
    else the first worker's (128 + the signal that ended it, or 1 if it exited with 0)."""
    reuse_port_socket(host, port).close()  # a taken or invalid address fails here, once
    context = multiprocessing.get_context("spawn")  # a fresh interpreter per worker
    processes = [context.Process(target=run_worker, args=(host, port, options),
                                 name=f"propdex-serve-{i}") for i in range(workers)]
    for process in processes:
        process.start()
    told_to_stop = False

    def stop_all() -> None:
        for process in processes:
            if process.is_alive():
                process.terminate()  # SIGTERM: uvicorn finishes its requests and exits

    def on_signal(_signum: int, _frame: Any) -> None:
        nonlocal told_to_stop
        told_to_stop = True
        stop_all()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ended = multiprocessing.connection.wait([p.sentinel for p in processes])
        first = next(p for p in processes if p.sentinel in ended)
        first.join()
        if not told_to_stop:
            print(f"propdex: worker process {first.pid} exited with status {first.exitcode}; "
                  "stopping the others", file=sys.stderr, flush=True)
            stop_all()
        for process in processes:
            process.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if told_to_stop:
        return 0
    # A worker ended by a signal reports 128 + its number, as a shell does.
    code = first.exitcode if first.exitcode is not None else 1
    return 128 - code if code < 0 else (code or 1)
