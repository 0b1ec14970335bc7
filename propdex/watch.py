"""`propdex watch DIR`: tell Prefect when a source file is created, changed or deleted.

Each change to a file of a supported type (PDF, EPUB, text, Markdown...) under DIR becomes one Prefect event, and the
`reingest-document` deployment's trigger turns that event into a run for that one file.
Links are followed as `propdex ingest` follows them (propdex.sources.walk): a change inside a
linked folder or to a linked file's target, a link made, removed or whose target appeared
each name the files the walk yields, at the paths it yields them (below DIR, links not
resolved).
The event is the whole contract, so anything else (a CI job, a sync script) may emit it:

    event:    propdex.source.changed
    resource: {"prefect.resource.id": "propdex.source.<absolute path of the file, links kept>"}
    payload:  {"change": "added" | "modified" | "deleted", "db": "<index folder>"}

The payload is optional: the triggered run reads the file's path from the resource id, and
`db` falls back to the deployment's default index. A deleted file is named like any other:
the triggered run finds it gone and removes its rows from the index (a document found at
other paths too only forgets this one).

Events go to the Prefect server named by PREFECT_API_URL (a `prefect server start` or Prefect
Cloud); without one there is nobody to deliver them to, so watching refuses to start.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from propdex.errors import NoPrefectServerError, RemoteWatchError, WatchUnavailableError
from propdex.ids import normalise_source
from propdex.security import is_within
from propdex.sources import Walk, is_supported, walk

SOURCE_CHANGED_EVENT = "propdex.source.changed"
SOURCE_RESOURCE_PREFIX = "propdex.source."
DEFAULT_DEBOUNCE_MS = 1600  # an editor's save or a file copy settles into one event

ChangeKind = Literal["added", "modified", "deleted"]


def watched_source(source: str | Path) -> str:
    """The path an event names: absolute, links not resolved, as the walk of a folder yields
    it (propdex.sources.walk), so that the run it triggers records where the file was found
    and a link removed later takes the document out."""
    return os.path.abspath(os.path.expanduser(os.fspath(source)))


def source_resource_id(source: str | Path) -> str:
    return SOURCE_RESOURCE_PREFIX + watched_source(source)


def source_changed_event(source: str | Path, change: ChangeKind, db: str | None = None) -> dict[str, Any]:
    """The keyword arguments of `prefect.events.emit_event` for one changed source."""
    path = watched_source(source)
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


def watched_paths(root: str, walked: Walk) -> list[str]:
    """What to hand the file system watch: ``root``, the real folders the walk reached
    through links and the real folders of the files that links to files lead to, those that
    lie outside it (and outside each other). A watch of ``root`` alone may not see inside
    linked folders (notify follows links only on some platforms, and never into a link made
    after the watch started), and never an edit of a linked file's target: the link itself
    does not change. A target's folder, not the target: an editor's save replaces the file."""
    paths = [root]
    targets = {os.path.dirname(real) for real in walked.file_links.values()}
    for real in sorted(walked.folders.keys() | targets):  # a folder sorts before those below it
        if not is_within(real, paths):
            paths.append(real)
    return paths


def walked_paths(path: str, walked: Walk) -> list[str]:
    """Where the walk finds the file that a watch reports at ``path``: below ``root`` or
    below the real folder of a link, and at every link to that file; ``[path]`` when
    the walk has it nowhere."""
    folder = walked.folders.get(os.path.realpath(os.path.dirname(path)))
    found = [os.path.join(folder, os.path.basename(path))] if folder else []
    real = os.path.realpath(path)
    found += [link for link, target in walked.file_links.items() if target == real]
    return found or [path]


def sources_of(walked: Walk) -> set[str]:
    """The sources the walk yields that can be read: a broken link is none until its target
    appears (an ``added`` then)."""
    return set(walked.files) - set(walked.broken)


def may_change_walk(raw: Iterable[tuple[Any, str]], walked: Walk, known: set[str]) -> bool:
    """Whether a batch may change what the walk yields: anything but changes to files it
    yields already (``known``) and to files it would never yield. A folder, a link to one,
    a path gone or a new source may; an edited source or an edited file of another type
    may not, so the common batch costs no walk of the whole folder."""
    for _, path in raw:
        if not os.path.isfile(path):  # a folder, a link to one, a broken link, a path gone
            return True
        if is_supported(path) and not known.intersection(walked_paths(path, walked)):
            return True
    return False


def source_changes(raw: Iterable[tuple[Any, str]], before: Walk, after: Walk) -> dict[str, ChangeKind]:
    """One kind per source for one debounced batch of watchfiles changes, the sources named
    as the walk yields them. ``before`` and ``after`` are the walks of the watched folder
    around the batch: a source only one of them holds was added or deleted, also by a link
    to a folder made or removed; a source both hold that the batch names was modified.

    The walks decide the kind, not the raw changes (a set, in no order): an editor's atomic
    save is a delete plus an add of a file that was there before and is there after.
    """
    earlier, now = sources_of(before), sources_of(after)
    named = {source for _, path in raw
             for source in walked_paths(path, before) + walked_paths(path, after)}
    kinds: dict[str, ChangeKind] = {}
    for source in sorted((earlier ^ now) | (named & earlier & now)):
        if source not in now or not Path(source).exists():
            kinds[source] = "deleted"
        else:
            kinds[source] = "modified" if source in earlier else "added"
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


def refuse_remote(folder: str | Path) -> None:
    """An object-store prefix cannot be watched: say what to do instead."""
    from propdex.remote import is_remote

    if is_remote(os.fspath(folder)):
        raise RemoteWatchError(
            f"{folder}: an object store cannot be watched (it sends no file system events); "
            f"run `propdex ingest {folder}` on a schedule instead: an unchanged re-run "
            "lists the prefix and downloads nothing")


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
    refuse_remote(folder)
    watchfiles = _import_watchfiles()
    root = normalise_source(folder)
    if not Path(root).is_dir():
        raise NotADirectoryError(f"{folder}: not a folder")
    ignore_noise = watchfiles.DefaultFilter()  # .git, __pycache__, editor swap files
    walked = walk(root)
    known = sources_of(walked)
    ready = False
    while True:
        paths = watched_paths(root, walked)
        # The first batch of each watch is handled even when empty: what changed while no
        # watch was in place (before the first, between two) shows in the walk.
        settled = False
        # yield_on_timeout: the first (possibly empty) batch proves the watch is in place.
        for batch in watchfiles.watch(*paths, watch_filter=ignore_noise, debounce=debounce_ms,
                                      stop_event=stop_event, yield_on_timeout=True,
                                      rust_timeout=500, raise_interrupt=False):
            if not ready:
                ready = True
                if on_ready:
                    on_ready()
            # A link that leads nowhere has nothing to watch: checked on every batch, empty ones
            # (twice a second) included, for its target's return or first appearance.
            revived = any(os.path.exists(link) for link in walked.broken)
            if not batch and settled and not revived:
                continue
            before = walked
            if not settled or revived or may_change_walk(batch, walked, known):
                # Walked again, so that files and links made or removed count.
                walked = walk(root)
                known = sources_of(walked)
            settled = True
            for source, change in source_changes(batch, before, walked).items():
                emit_source_changed(source, change, db)
                if on_change:
                    on_change(source, change)
            if walked is not before and watched_paths(root, walked) != paths:
                break  # a link came or went: watch the new set of folders
        else:
            return  # stopped or interrupted


def run_watch(folder: str, *, db: str | None = None, debounce_ms: int = DEFAULT_DEBOUNCE_MS) -> int:
    """`propdex watch DIR`: prints one line per event; returns the exit code."""
    refuse_remote(folder)
    # A mistyped folder is named before the server is asked for: otherwise it would show
    # only once a Prefect server had been set up for it.
    if not Path(normalise_source(folder)).is_dir():
        raise NotADirectoryError(f"{folder}: not a folder")
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
