"""The extraction worker process: ``python -m propdex.extract.worker MEMORY_MB``.

It reads (source, ExtractionSettings) requests from stdin and answers each with a WorkerResult on
stdout (multiprocessing's length-prefixed pickle framing), until stdin closes; it ends at once,
even mid-document, when its parent is gone (stdin hung up). Its address
space is capped at what it uses after importing PyMuPDF plus MEMORY_MB, so a
decompression bomb fails inside MuPDF instead of exhausting the machine's memory. See
``propdex.extract.isolated`` for the parent side.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection

from propdex.errors import ExtractionError
from propdex.extract import extract_document
from propdex.extract.options import ExtractionSettings
from propdex.models import ExtractedDocument

# Substrings of MuPDF's messages when an allocation failed under the memory ceiling.
_OUT_OF_MEMORY = ("malloc (", "realloc (", "calloc (", "out of memory", "cannot allocate")
_MB = 1024 * 1024
TOO_LARGE = "too large"


@dataclass
class WorkerResult:
    document: ExtractedDocument | None
    error: tuple[str, str] | None  # (ExtractionError class name or TOO_LARGE, reason)
    peak_rss_bytes: int  # peak resident memory while extracting this document (0: unknown)


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def limit_memory(extra_mb: int) -> None:
    """Cap the address space at its current size plus ``extra_mb`` (Linux only; elsewhere
    the time limit still applies)."""
    try:
        import resource
    except ImportError:
        return
    current = _status_kib("VmSize")
    if current is not None:
        limit = current * 1024 + extra_mb * _MB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _reset_peak_rss() -> None:
    try:  # writing 5 resets VmHWM (Linux 4.0+), so the peak is this document's alone
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def extract_one(source: str, settings: ExtractionSettings) -> WorkerResult:
    _reset_peak_rss()
    try:
        document, error = extract_document(source, settings), None
    except MemoryError:
        document, error = None, (TOO_LARGE, "")
    except ExtractionError as failure:
        reason = failure.reason
        kind = TOO_LARGE if any(m in reason.lower() for m in _OUT_OF_MEMORY) else type(failure).__name__
        document, error = None, (kind, reason)
    return WorkerResult(document, error, (_status_kib("VmHWM") or 0) * 1024)


def serve(requests: Connection, answers: Connection) -> None:
    while True:
        try:
            source, settings = requests.recv()
        except EOFError:  # the parent closed the pipe or exited
            return
        answers.send(extract_one(source, settings))


def exit_when_orphaned(requests: Connection) -> None:
    """End this process as soon as the parent's end of the request pipe closes.

    A parent killed mid-document (a flow run cancelled from the Prefect UI is SIGKILLed by
    its runner after a grace period) cannot stop its workers, and the main thread reads the
    pipe only between documents: without this, an orphaned worker went on extracting a long
    PDF for minutes. poll() with no events asked for still reports POLLHUP, which a pipe's
    read end gets once no writer is left, without consuming a request."""
    def watch() -> None:
        poller = select.poll()
        poller.register(requests.fileno(), 0)
        poller.poll()  # returns only on hang-up or error
        os._exit(128 + signal.SIGHUP)

    threading.Thread(target=watch, name="propdex-orphan-watch", daemon=True).start()


def main() -> None:
    # Answers go over a private copy of stdout; fd 1 then points at stderr, because MuPDF
    # and PyMuPDF print warnings to stdout and would corrupt the answer stream.
    answers = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    requests = Connection(os.dup(0), writable=False)
    exit_when_orphaned(requests)
    # PyMuPDF (and whatever it loads on import) before the cap: the cap is for documents.
    import propdex.extract.pdf  # noqa: F401

    limit_memory(int(sys.argv[1]))
    serve(requests, answers)


if __name__ == "__main__":
    # Through the package module, so answers pickle as propdex.extract.worker.WorkerResult
    # rather than __main__.WorkerResult.
    from propdex.extract.worker import main as worker_main

    try:
        worker_main()
    except KeyboardInterrupt:
        # Ctrl-C reaches the whole process group: the parent reports the interruption. The
        # worker ends at once, quietly, so the parent's threads are not kept waiting for it.
        sys.exit(128 + signal.SIGINT)
