"""`propdex watch` follows links to folders as `propdex ingest` walks them: a change inside a
linked folder, a link made while watching and a link removed each become events naming the
files at the paths the walk yields, and the runs those events trigger (reingest-document,
run here in-process as the deployment's trigger would) keep the index as an ingest of the
folder would leave it."""

from __future__ import annotations

import queue
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from propdex.sources import walk
from propdex.store import Index
from propdex.watch import may_change_walk, watch

NOTE = "# Herons\n\nHerons nest in tall trees near water. Herons eat fish and frogs.\n"
EDITED = "# Herons\n\nHerons stand still in shallow water and strike fast at fish.\n"
SECONDS = 60  # for one event to arrive; events usually come within a second


def _note(path: Path, text: str = NOTE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _documents(db: Path) -> dict[str, dict]:
    return {d["source"]: d for d in Index.open(str(db), create=False).documents(with_text=True)}


def _ingest(folder: Path, db: Path) -> None:
    from flows.ingest import ingest

    ingest(sources=[str(folder)], db=str(db))


def _reingest(events: list[tuple[str, str]], db: Path) -> None:
    """What the reingest-document deployment's trigger does with each event."""
    from flows.reingest import reingest_document

    for source, _change in events:
        reingest_document(source=source, db=str(db))


@contextmanager
def watching(folder: Path) -> Iterator[Callable[[int], list[tuple[str, str]]]]:
    """``watch(folder)`` in a thread; yields ``next_events(n)``: the next ``n`` events."""
    stop, ready = threading.Event(), threading.Event()
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    thread = threading.Thread(target=watch, args=(folder,), kwargs={
        "debounce_ms": 200, "stop_event": stop, "on_ready": ready.set,
        "on_change": lambda source, change: events.put((source, change))}, daemon=True)
    thread.start()

    def next_events(count: int) -> list[tuple[str, str]]:
        return sorted(events.get(timeout=SECONDS) for _ in range(count))

    try:
        assert ready.wait(SECONDS), "the watch did not start"
        yield next_events
    finally:
        stop.set()
        thread.join(SECONDS)


@pytest.mark.prefect
def test_an_edit_inside_a_linked_folder_is_reingested_where_the_walk_found_it(tmp_path):
    target = _note(tmp_path / "elsewhere" / "deep" / "a.md")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    walked = str(tmp_path / "folder" / "linked" / "deep" / "a.md")
    db = tmp_path / "db"
    _ingest(tmp_path / "folder", db)
    with watching(tmp_path / "folder") as next_events:
        target.write_text(EDITED, encoding="utf-8")
        events = next_events(1)
    _reingest(events, db)
    row = _documents(db)[str(target)]

    assert ([(walked, "modified")], EDITED.strip(), [walked]) == (events, row["text"], row["found_at"])


@pytest.mark.prefect
def test_a_link_made_while_watching_is_followed(tmp_path):
    target = _note(tmp_path / "elsewhere" / "a.md")
    _note(tmp_path / "folder" / "own.md")
    walked = str(tmp_path / "folder" / "linked" / "a.md")
    db = tmp_path / "db"
    _ingest(tmp_path / "folder", db)
    with watching(tmp_path / "folder") as next_events:
        (tmp_path / "folder" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
        added = next_events(1)
        _reingest(added, db)
        target.write_text(EDITED, encoding="utf-8")  # seen only if the link's folder is watched
        modified = next_events(1)
    _reingest(modified, db)

    assert ([(walked, "added")], [(walked, "modified")], EDITED.strip()) == (
        added, modified, _documents(db)[str(target)]["text"])


@pytest.mark.prefect
def test_removing_a_link_removes_its_documents(tmp_path):
    _note(tmp_path / "elsewhere" / "deep" / "a.md")
    _note(tmp_path / "elsewhere" / "b.md")
    kept = _note(tmp_path / "folder" / "own.md")
    link = tmp_path / "folder" / "linked"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    db = tmp_path / "db"
    _ingest(tmp_path / "folder", db)
    with watching(tmp_path / "folder") as next_events:
        link.unlink()
        events = next_events(2)
    _reingest(events, db)

    assert ([(str(link / "b.md"), "deleted"), (str(link / "deep" / "a.md"), "deleted")],
            [str(kept)]) == (events, sorted(_documents(db)))


@pytest.mark.prefect
def test_a_link_whose_folder_is_deleted_and_made_again_is_followed_again(tmp_path):
    _note(tmp_path / "elsewhere" / "a.md")
    link = tmp_path / "folder" / "linked"
    link.parent.mkdir()
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with watching(tmp_path / "folder") as next_events:
        shutil.rmtree(tmp_path / "elsewhere")
        gone = next_events(1)
        _note(tmp_path / "elsewhere" / "b.md")
        back = next_events(1)

    assert ([(str(link / "a.md"), "deleted")], [(str(link / "b.md"), "added")]) == (gone, back)


@pytest.mark.prefect
def test_an_edit_of_a_linked_files_target_outside_the_folder_is_reingested(tmp_path):
    target = _note(tmp_path / "elsewhere" / "a.md")
    link = tmp_path / "folder" / "linked.md"
    link.parent.mkdir()
    link.symlink_to(target)
    db = tmp_path / "db"
    _ingest(tmp_path / "folder", db)
    with watching(tmp_path / "folder") as next_events:
        target.write_text(EDITED, encoding="utf-8")  # the link itself does not change
        events = next_events(1)
    _reingest(events, db)

    assert ([(str(link), "modified")], EDITED.strip()) == (events, _documents(db)[str(target)]["text"])


@pytest.mark.prefect
@pytest.mark.parametrize(("link_name", "target", "made", "walked"), [
    ("later.md", "later.md", "later.md", "later.md"),  # a link to a file not there yet
    ("linked", "later", "later/a.md", "linked/a.md"),  # a link to a folder not there yet
])
def test_a_link_broken_when_the_watch_starts_is_followed_once_its_target_appears(
        tmp_path, link_name, target, made, walked):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / link_name).symlink_to(tmp_path / "elsewhere" / target)
    (tmp_path / "elsewhere").mkdir()
    with watching(folder) as next_events:
        _note(folder / "own.md")
        own = next_events(1)  # the watch has walked the folder and found the link broken
        _note(tmp_path / "elsewhere" / made)  # nothing in the watched folder changes
        events = next_events(1)

    assert ([(str(folder / "own.md"), "added")], [(str(folder / walked), "added")]) == (own, events)


@pytest.mark.prefect
def test_a_removed_path_takes_out_only_what_no_other_path_still_yields(tmp_path):
    target = _note(tmp_path / "elsewhere" / "a.md")
    first, second = tmp_path / "first" / "a.md", tmp_path / "second" / "a.md"
    db = tmp_path / "db"
    for link in (first, second):
        link.parent.mkdir()
        link.symlink_to(target)
        _ingest(link.parent, db)
    first.unlink()
    _reingest([(str(first), "deleted")], db)
    after_one = _documents(db)[str(target)]["found_at"]
    second.unlink()
    _reingest([(str(second), "deleted")], db)

    assert ([str(second)], {}) == (after_one, _documents(db))



@pytest.mark.parametrize(("name", "change", "expected"), [
    ("a.md", lambda path: path.write_text(EDITED), False),  # an edit of a source it yields
    ("notes.py", lambda path: path.write_text("x = 1"), False),  # never a source
    ("b.md", lambda path: path.write_text(NOTE), True),  # a new source
    ("a.md", lambda path: path.unlink(), True),
    ("sub", lambda path: path.mkdir(), True),
    ("linked", lambda path: path.symlink_to(path.parent.parent, target_is_directory=True), True),
])
def test_only_a_batch_that_may_change_the_walk_needs_one(tmp_path, name, change, expected):
    folder = tmp_path / "folder"
    _note(folder / "a.md")
    (folder / "notes.py").write_text("x = 0")
    walked = walk(str(folder))
    change(folder / name)
    assert expected == may_change_walk([(None, str(folder / name))], walked, set(walked.files))
