"""`propdex watch DIR`: tell Prefect when a source file is created, changed or deleted.

Each change to a file of a supported type (PDF, EPUB, text, Markdown...) under DIR becomes one Prefect event, and the
`reingest-document` deployment's trigger turns that event into a run for that one file.
The event is the whole contract, so anything else (a CI job, a sync script) may emit it:

    event:    propdex.source.changed
    resource: {"prefect.resource.id": "propdex.source.<absolute path of the file>"}
    payload:  {"change": "added" | "modified" | "deleted", "db": "<index folder>"}

The payload is optional: the triggered run reads the file's path from the resource id, and
`db` falls back to the deployment's default index. A deleted file is named like any other:
the triggered run finds it gone and removes its rows from the index.

Events go to the Prefect server named by PREFECT_API_URL (a `prefect server start` or Prefect
Cloud); without one there is nobody to deliver them to, so watching refuses to start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from propdex.errors import NoPrefectServerError, WatchUnavailableError
from propdex.ids import normalise_source
from propdex.sources import is_supported

SOURCE_CHANGED_EVENT = "propdex.source.changed"
SOURCE_RESOURCE_PREFIX = "propdex.source."
DEFAULT_DEBOUNCE_MS = 1600  # an editor's save or a file copy settles into one event

ChangeKind = Literal["added", "modified", "deleted"]


def source_resource_id(source: str | Path) -> str:
    return SOURCE_RESOURCE_PREFIX + normalise_source(source)


def source_changed_event(source: str | Path, change: ChangeKind, db: str | None = None) -> dict[str, Any]:
    """The keyword arguments of `prefect.events.emit_event` for one changed source."""
    path = normalise_source(source)
    payload: dict[str, str] = {"change": change}
    if db:
        # The index lives where the watcher says, not where the flow run's working directory is.
        payload["db"] = normalise_source(db)
    return {
        "event": SOURCE_CHANGED_EVENT,
        "resource": {"prefect.resource.id": source_resource_id(path),
                     "prefect.resource.name": Path(path).name},
        "payload": payload,
    }


def emit_source_changed(source: str | Path, change: ChangeKind, db: str | None = None):
    """Send one `propdex.source.changed` event; returns the Event (None if Prefect dropped it)."""
    from prefect.events import emit_event

    return emit_event(**source_changed_event(source, change, db))


def is_watched_source(path: str, root: Path) -> bool:
    """A file ingest would pick up from ``root``: a supported suffix, no hidden part."""
    try:
        parts = Path(path).relative_to(root).parts
    except ValueError:
        parts = Path(path).parts
    return is_supported(path) and not any(part.startswith(".") for part in parts)


def source_changes(raw: Iterable[tuple[Any, str]], root: Path) -> dict[str, ChangeKind]:
    """Collapse one debounced batch of watchfiles changes into one kind per source.

    The file system decides the kind, not the order of the raw changes (a set): an editor's
    atomic save is a delete plus an add of the same path, and the file exists afterwards.
    """
    added: dict[str, bool] = {}
    for change, path in raw:
        if is_watched_source(path, root):
            source = normalise_source(path)
            added[source] = added.get(source, False) or getattr(change, "name", str(change)) == "added"
    kinds: dict[str, ChangeKind] = {}
    for source, was_added in sorted(added.items()):
        if not Path(source).exists():
            kinds[source] = "deleted"
        else:
            kinds[source] = "added" if was_added else "modified"
    return kinds


def require_prefect_server() -> str:
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise NoPrefectServerError(
            "PREFECT_API_URL is not set: start `prefect server start` and run "
            "`prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api` (or export it)"
        )
    return url


def _import_watchfiles():
    try:
        import watchfiles
    except ImportError as exc:
        raise WatchUnavailableError(
            "propdex watch needs the optional dependency watchfiles: pip install 'propdex[watch]'"
        ) from exc
    return watchfiles


def watch(
    folder: str | Path,
    *,
    db: str | None = None,
    debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    stop_event: threading.Event | None = None,
    on_ready: Callable[[], None] | None = None,
    on_change: Callable[[str, ChangeKind], None] | None = None,
) -> None:
    """Emit a `propdex.source.changed` event for every created, modified or deleted source
    under ``folder`` until ``stop_event`` is set or the process is interrupted.

    ``on_ready`` is called once the file system watch is in place; ``on_change`` after each
    event is handed to Prefect.
    """
    watchfiles = _import_watchfiles()
    root = Path(normalise_source(folder))
    if not root.is_dir():
        raise NotADirectoryError(f"{folder}: not a folder")
    ignore_noise = watchfiles.DefaultFilter()  # .git, __pycache__, editor swap files

    def keep(change, path: str) -> bool:
        return ignore_noise(change, path) and is_watched_source(path, root)

    ready = False
    # yield_on_timeout: the first (possibly empty) batch proves the watch is in place.
    for batch in watchfiles.watch(root, watch_filter=keep, debounce=debounce_ms,
                                  stop_event=stop_event, yield_on_timeout=True,
                                  rust_timeout=500, raise_interrupt=False):
        if not ready:
            ready = True
            if on_ready:
                on_ready()
        for source, change in source_changes(batch, root).items():
            emit_source_changed(source, change, db)
            if on_change:
                on_change(source, change)


def run_watch(folder: str, *, db: str | None = None, debounce_ms: int = DEFAULT_DEBOUNCE_MS) -> int:
    """`propdex watch DIR`: prints one line per event; returns the exit code."""
    url = require_prefect_server()

    def announce() -> None:
        print(f"propdex: watching {normalise_source(folder)} (events to {url}; Ctrl-C stops)",
              flush=True)

    def report(source: str, change: ChangeKind) -> None:
        print(f"{change:8} {source}", flush=True)

    watch(folder, db=db, debounce_ms=debounce_ms, on_ready=announce, on_change=report)
    # Events are sent by a background thread: deliver the last ones before exiting.
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all()
    return 0
