"""VersionWatch: a poller asks LanceDB for a table's version only when the table's folder
says a commit may have landed."""

from __future__ import annotations

import os
import time

import pytest

from propdex.store import Index, version_watch
from propdex.store.schema import DOCUMENTS
from propdex.store.version_watch import VersionWatch
from tests.store_rows import DIM, make_version


def age(folder, seconds: float = 10.0) -> None:
    """Set ``folder``'s modification time ``seconds`` into the past (a change long ago)."""
    then = time.time_ns() - int(seconds * 1e9)
    os.utime(folder, ns=(then, then))


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "_versions"
    folder.mkdir()
    age(folder)
    return folder


def test_a_new_watch_needs_asking(folder):
    assert VersionWatch(folder).needs_asking()


def test_an_unchanged_folder_needs_no_asking_once_asked(folder):
    watch = VersionWatch(folder)
    watch.needs_asking()
    watch.asked()
    assert not watch.needs_asking()


def test_a_changed_folder_needs_asking(folder):
    watch = VersionWatch(folder)
    watch.needs_asking()
    watch.asked()
    (folder / "2.manifest").write_bytes(b"")
    age(folder, 5.0)  # a change, seen after the quiet time
    assert watch.needs_asking()


def test_a_folder_changed_within_the_quiet_time_needs_asking_every_time(folder):
    watch = VersionWatch(folder)
    (folder / "2.manifest").write_bytes(b"")  # its stamp is now
    watch.needs_asking()
    watch.asked()
    assert watch.needs_asking()


def test_lancedb_is_asked_now_and_then_whatever_the_folder_says(folder, monkeypatch):
    monkeypatch.setattr(version_watch, "MAX_TRUST_SECONDS", 0.0)
    watch = VersionWatch(folder)
    watch.needs_asking()
    watch.asked()
    assert watch.needs_asking()


@pytest.mark.parametrize("where", [None, "missing"])
def test_without_a_folder_every_poll_asks(tmp_path, where):
    watch = VersionWatch(None if where is None else tmp_path / where)
    watch.needs_asking()
    watch.asked()
    assert watch.needs_asking()


def test_a_commit_through_lancedb_moves_the_documents_folder(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    index.replace_document(*make_version("first", "r1", ["Owls hunt at night."]).rows)
    watch = VersionWatch(index.versions_folder(DOCUMENTS))
    age(watch.folder)
    watch.needs_asking()
    watch.asked()
    unchanged = watch.needs_asking()
    index.replace_document(*make_version("second", "r1", ["Bees make honey."]).rows)
    assert (False, True) == (unchanged, watch.needs_asking())


def test_an_index_in_an_object_store_has_no_folder_to_watch():
    assert Index.open("s3://bucket/db", dim=DIM).versions_folder(DOCUMENTS) is None
