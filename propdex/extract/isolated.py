"""Extraction in worker processes: a hard time limit, a memory ceiling, crash containment.

PyMuPDF runs C code over bytes written by strangers. A crafted or damaged file can keep it
busy for minutes, make it allocate gigabytes (a decompression bomb) or crash the
interpreter, and a thread can be stopped in none of these cases. So documents are
extracted by worker processes (``propdex.extract.worker``): a worker is killed when the
document's deadline passes, its address space is capped at ``extract_memory_mb`` above
what it starts with, and a crash ends as that document's status instead of taking the
run down. Workers are plain subprocesses (not multiprocessing children: those re-import
the caller's main script and cannot be started from daemonic processes such as some Dask
workers); they stay alive between documents, so the interpreter and PyMuPDF start-up is
paid once per worker, not per document.

Documents wait for one of ``extract_workers`` slots (by default one per core) before they
get a worker, and each worker's ONNX Runtime gets its share of the cores. The layout
engine creates its sessions without a thread count, so by default each would run one
intra-op thread per physical core, pinned to it and spinning while it waits: with a worker
per document, workers fight over the same cores and the spinning burns the CPU the other
stages need (bench/RESULTS.md). ONNX Runtime sizes such pools from
``ORT_INTRA_OP_NUM_THREADS``, which the worker is started with unless it is already set.

The CLI knows which PDFs a run will read before Prefect's API has started (seconds of one
core), so it hands them to the workers at once (``start_extractions``): the extract task of
each takes the extraction already in flight instead of starting it again, within its own
deadline; what no task claims is ended with the run (``drop_early_extractions``).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from multiprocessing.connection import Connection

import propdex.errors as errors
from propdex.deadlines import Deadline
from propdex.embed.base import usable_cores
from propdex.errors import DocumentTooLargeError, ExtractionError, RunStoppedError
from propdex.extract import PYMUPDF_SUFFIXES, extract_document
from propdex.extract.options import ExtractionSettings, extraction_settings
from propdex.extract.worker import TOO_LARGE, WorkerResult
from propdex.ids import normalise_source
from propdex.models import ExtractedDocument
from propdex.settings import Settings
from propdex.stopping import run_is_stopping

MAX_IDLE_WORKERS = 4
# Documents per slot extracted ahead of their tasks: enough to keep the workers busy while
# Prefect's API starts; later documents wait for their tasks (a task whose result Prefect
# finds in its cache never claims one, and that work is lost).
EARLY_PER_SLOT = 2
ONNX_THREADS_VARIABLE = "ORT_INTRA_OP_NUM_THREADS"


class _Worker:
    def __init__(self, kind: tuple[int, int]):
        self.kind = kind
        memory_mb, onnx_threads = kind
        environment = dict(os.environ)
        environment.setdefault(ONNX_THREADS_VARIABLE, str(onnx_threads))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "propdex.extract.worker", str(memory_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True, env=environment,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests = Connection(os.dup(self.process.stdin.fileno()), readable=False)
        self.answers = Connection(os.dup(self.process.stdout.fileno()), writable=False)
        self.process.stdin.close()
        self.process.stdout.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        for connection in (self.requests, self.answers):
            connection.close()
        if self.alive():
            self.process.kill()
        self.process.wait()


_lock = threading.Lock()
_idle: list[_Worker] = []
_busy: set[_Worker] = set()  # extracting a document for a thread of this process


def _acquire(kind: tuple[int, int]) -> _Worker:
    with _lock:
        while _idle:
            worker = _idle.pop()
            if worker.alive() and worker.kind == kind:
                return worker
            worker.stop()
    return _Worker(kind)


def _release(worker: _Worker) -> None:
    with _lock:
        if worker.alive() and len(_idle) < MAX_IDLE_WORKERS:
            _idle.append(worker)
            return
    worker.stop()


def start_workers(settings: Settings, documents: int) -> None:
    """Start the extraction workers ``documents`` PDFs will use (one per slot at most) now
    and leave them idle, so that their interpreter and PyMuPDF start-up overlap other
    start-up work (the CLI: Prefect's API) rather than delaying the first documents. The
    flow gives its tasks ``for_documents(settings, documents)``, so they take these workers."""
    settings = for_documents(settings, documents)
    for _ in range(min(documents, extraction_slots(settings), MAX_IDLE_WORKERS)):
        _release(_Worker(_worker_kind(settings)))


@atexit.register
def stop_workers() -> None:
    """Stop every extraction worker, busy ones too: each document they were extracting ends
    as a crashed extraction in the thread waiting for it. A run that is cancelled (from the
    Prefect UI) or interrupted calls this, so that its process can end at once instead of
    when its last extraction would have finished. Documents still waiting for a slot then
    start no worker (``_not_stopped``): a slot freed by a killed worker would otherwise start
    the next document's, which the runner's SIGTERM has already passed, and the process
    would wait for that extraction until the runner's SIGKILL."""
    with _lock:
        workers, _idle[:] = list(_idle), []
        busy = list(_busy)
    for worker in busy:
        worker.process.kill()  # the waiting thread stops it: closing its pipes here would race
    for worker in workers:
        worker.stop()
    _slots.wake()


def _not_stopped(source: str) -> None:
    if run_is_stopping():
        raise RunStoppedError(f"{source}: extraction not started, the run is being cancelled")


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Slots:
    """Extractions running at once in this process, up to a limit given at each request
    (runs with different settings may share the process)."""

    def __init__(self) -> None:
        self._busy = 0
        self._changed = threading.Condition()

    def take(self, limit: int, timeout: float | None) -> bool:
        """Take a slot once fewer than ``limit`` are taken; False when ``timeout`` passed first,
        or once the run is stopping (the caller then checks ``run_is_stopping``)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._busy < limit or run_is_stopping(),
                                          timeout) or run_is_stopping():
                return False
            self._busy += 1
            return True

    def wake(self) -> None:
        """Let the threads waiting for a slot see that the run is stopping."""
        with self._changed:
            self._changed.notify_all()

    def give_back(self) -> None:
        with self._changed:
            self._busy -= 1
            self._changed.notify_all()


_slots = _Slots()


def extraction_slots(settings: Settings) -> int:
    """Documents extracted at once: ``extract_workers``, by default one per core."""
    return settings.extract_workers or usable_cores()


def pymupdf_sources(sources: Iterable[str]) -> int:
    """How many of ``sources`` are read in extraction workers (PDFs and other formats
    PyMuPDF opens)."""
    return sum(source.lower().endswith(PYMUPDF_SUFFIXES) for source in sources)


def for_documents(settings: Settings, documents: int) -> Settings:
    """``settings`` for a run that extracts ``documents`` PDFs: no more slots than documents,
    nor than documents processed at once (``document_concurrency``), so that a run of one
    PDF, or one document at a time, gives its worker every core."""
    slots = max(1, min(extraction_slots(settings), documents, settings.document_concurrency))
    return settings if slots == settings.extract_workers else settings.model_copy(
        update={"extract_workers": slots})


def _worker_kind(settings: Settings) -> tuple[int, int]:
    """(memory ceiling, ONNX Runtime threads) of a worker: the cores shared among the slots."""
    return settings.extract_memory_mb, max(1, usable_cores() // extraction_slots(settings))


def run_worker(source: str, settings: Settings, timeout: float | None) -> WorkerResult | None:
    """Extract ``source`` in a worker process once an extraction slot is free; None when
    ``timeout`` seconds passed first (a worker still busy with it is killed). A crashed
    worker raises ExtractionError naming the signal. An extraction of ``source`` started
    early with the same settings is taken over, once: its result (or its crash) is this
    one's, and its worker is killed if ``timeout`` passes first."""
    with _lock:
        early = _early.pop(_early_key(source, settings), None)
    if early is not None and not early.future.cancel():  # running or done: not started again
        try:
            return early.future.result(timeout)
        except TimeoutError:
            early.stop()
            return None
    return _extract_in_slot(source, settings, timeout)


def _extract_in_slot(source: str, settings: Settings, timeout: float | None,
                     early: _Early | None = None) -> WorkerResult | None:
    started = time.monotonic()
    if not _slots.take(extraction_slots(settings), timeout):
        _not_stopped(source)
        return None
    try:
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        return _extract_in_worker(source, settings, left, early)
    finally:
        _slots.give_back()


def _extract_in_worker(source: str, settings: Settings, timeout: float | None,
                       early: _Early | None) -> WorkerResult | None:
    worker = _acquire(_worker_kind(settings))
    if early is not None and not early.attach(worker):
        _release(worker)  # dropped before it started
        return None
    with _lock:
        # Under the lock stop_workers takes: a worker is either killed by it or never used.
        stopped = run_is_stopping()
        if not stopped:
            _busy.add(worker)
    if stopped:
        worker.stop()
        if early is not None:
            early.detach()
        _not_stopped(source)
    try:
        worker.requests.send((source, extraction_settings(settings)))
        if not worker.answers.poll(timeout):
            worker.stop()
            return None
        result = worker.answers.recv()
    except (EOFError, OSError):
        code = worker.process.wait()  # the worker died: EOF came from its exit
        worker.stop()
        reason = _exit_reason(code)
        raise ExtractionError(source, f"extraction crashed ({reason})") from None
    except BaseException:
        worker.stop()
        raise
    finally:
        with _lock:
            _busy.discard(worker)
        if early is not None:
            early.detach()
    _release(worker)
    return result


class _Early:
    """An extraction started before its task asked for it."""

    def __init__(self) -> None:
        self.future: Future[WorkerResult | None] = Future()
        self._worker: _Worker | None = None
        self._stopped = False

    def attach(self, worker: _Worker) -> bool:
        """Note the worker running it; False once it was stopped."""
        with _lock:
            self._worker = worker
            return not self._stopped

    def detach(self) -> None:
        with _lock:
            self._worker = None

    def stop(self) -> None:
        """Kill its worker: the extraction ends as a crash that nobody reads."""
        with _lock:
            self._stopped = True
            worker = self._worker
        if worker is not None:
            worker.process.kill()


_early: dict[tuple[str, ExtractionSettings, tuple[int, int]], _Early] = {}


def _early_key(source: str, settings: Settings) -> tuple[str, ExtractionSettings, tuple[int, int]]:
    return source, extraction_settings(settings), _worker_kind(settings)


def start_extractions(sources: list[str], settings: Settings) -> None:
    """Extract ``sources`` (normalised paths of PDFs a run will read, in the order its tasks
    ask for them) now, so that the workers read while the caller starts the rest of the run.
    ``settings`` are those the run's tasks get (``for_documents``): an extract task with
    other settings does not take the result. Each extraction is bounded by
    ``document_timeout_s`` from its own start, so earlier than its task's deadline, and
    takes an extraction slot like a task's."""
    slots = extraction_slots(settings)
    timeout = settings.document_timeout_s or None
    pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="propdex-early-extract")
    # No more documents than the run processes at once: the others start with their tasks.
    for source in sources[: min(slots * EARLY_PER_SLOT, settings.document_concurrency)]:
        early = _Early()
        with _lock:
            if _early.setdefault(_early_key(source, settings), early) is not early:
                continue
        pool.submit(_run_early, early, source, settings, timeout)
    pool.shutdown(wait=False)  # its threads end with their extractions


def _run_early(early: _Early, source: str, settings: Settings, timeout: float | None) -> None:
    if not early.future.set_running_or_notify_cancel():
        return  # claimed by its task, or dropped, before it started
    try:
        early.future.set_result(_extract_in_slot(source, settings, timeout, early))
    except BaseException as exc:  # noqa: BLE001 - the claiming task raises it
        early.future.set_exception(exc)


def drop_early_extractions() -> None:
    """End the early extractions no task took (their worker killed) and wait for them."""
    with _lock:
        left = list(_early.values())
        _early.clear()
    for early in left:
        if not early.future.cancel():
            early.stop()
    wait([early.future for early in left])


def _error(source: str, kind: str, reason: str, settings: Settings) -> ExtractionError:
    if kind == TOO_LARGE:
        detail = f" ({reason})" if reason else ""
        return DocumentTooLargeError(
            source, f"too large: extraction needs more than extract_memory_mb="
            f"{settings.extract_memory_mb}{detail}",
        )
    cls = getattr(errors, kind, ExtractionError)
    if not (isinstance(cls, type) and issubclass(cls, ExtractionError)):
        cls = ExtractionError
    return cls(source, reason)


def extract_isolated(path: str | os.PathLike[str], settings: Settings,
                     deadline: Deadline | None = None) -> ExtractedDocument:
    """``extract_document`` in a worker process, bounded by ``deadline`` and
    ``extract_memory_mb``: the same ExtractionError kinds, DocumentTimeoutError at the
    deadline, and ExtractionError when the worker crashed."""
    source = normalise_source(path)
    if not source.lower().endswith(PYMUPDF_SUFFIXES):
        # Text and Markdown are decoded by Python code bounded by max_file_mb: no worker.
        document = extract_document(source, settings)
        if deadline is not None:
            deadline.check("extraction")
        return document
    timeout = max(0.0, deadline.remaining()) if deadline is not None else None
    result = run_worker(source, settings, timeout)
    if result is None:
        if deadline is None:  # an early extraction that outlived its own document_timeout_s
            deadline = Deadline(source, time.monotonic(), settings.document_timeout_s)
        raise deadline.expired("extraction")
    if result.error is not None:
        raise _error(source, *result.error, settings)
    assert result.document is not None
    return result.document
