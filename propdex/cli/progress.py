"""Progress of a CLI ingest on the terminal: documents done / total, current stage, rate.

The CLI shows a display for the length of a run; the flow and the stage timer report to it
through the functions below, which do nothing when no display is shown (deployment runs,
``--json``, output to a file or pipe, Dask worker processes). tqdm draws the bar.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import PurePath
from typing import IO

_lock = threading.Lock()
_display: ProgressDisplay | None = None


def wanted(json_output: bool, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> bool:
    """A display only for a person watching: both streams are terminals and no --json."""
    streams = (stdout or sys.stdout, stderr or sys.stderr)
    return not json_output and all(getattr(s, "isatty", lambda: False)() for s in streams)


class ProgressDisplay:
    """One tqdm bar counting documents; its description is the run's phase, its postfix the
    stage a document has just entered."""

    def __init__(self, stream: IO[str], tick_seconds: float = 1.0):
        from tqdm import tqdm

        self._names: dict[str, str] = {}
        # Until the documents are known: the phase and the time it has taken.
        self._bar = tqdm(total=None, unit="doc", desc="starting", file=stream,
                         dynamic_ncols=True, leave=False, mininterval=0.2,
                         bar_format="{desc} [{elapsed}]")
        # tqdm redraws only when told; the ticker keeps the elapsed time moving through
        # Prefect's start-up and long stages.
        self._stopped = threading.Event()
        self._ticker = threading.Thread(target=self._tick, args=(tick_seconds,), daemon=True,
                                        name="propdex-progress")
        self._ticker.start()

    def _tick(self, seconds: float) -> None:
        while not self._stopped.wait(seconds):
            self._bar.refresh()

    def phase(self, text: str) -> None:
        self._bar.set_description_str(text)

    def planned(self, documents: Sequence[tuple[str, str]]) -> None:
        """The run's (doc_id, source) to process; the rate counts from here."""
        self._names = {doc_id: PurePath(source).name for doc_id, source in documents}
        self._bar.bar_format = None  # tqdm's own: count, bar, elapsed<remaining, rate
        self._bar.reset(total=len(documents))
        self._bar.set_description_str("documents")

    def stage(self, doc_id: str, stage: str) -> None:
        self._bar.set_postfix_str(f"{stage} {self._names.get(doc_id, doc_id)}")

    def document_finished(self) -> None:
        self._bar.update(1)
        self._bar.refresh()  # a finished document is shown at once, not at the next redraw

    def close(self) -> None:
        self._stopped.set()
        self._ticker.join()
        self._bar.close()


@contextmanager
def shown(enabled: bool, stream: IO[str] | None = None) -> Iterator[ProgressDisplay | None]:
    """Show a display on ``stream`` (stderr) for the block when ``enabled``."""
    global _display
    if not enabled:
        yield None
        return
    display = ProgressDisplay(stream or sys.stderr)
    with _lock:
        _display = display
    try:
        yield display
    finally:
        with _lock:
            _display = None
        display.close()


def _current() -> ProgressDisplay | None:
    with _lock:
        return _display


def phase(text: str) -> None:
    if display := _current():
        display.phase(text)


def planned(documents: Sequence[tuple[str, str]]) -> None:
    if display := _current():
        display.planned(documents)


def stage_started(doc_id: str, stage: str) -> None:
    if display := _current():
        display.stage(doc_id, stage)


def document_finished() -> None:
    if display := _current():
        display.document_finished()
