"""Symbolic links in a walked folder: links to files and to folders are followed (as
``find -L``), a link loop ends, and a document found through a link leaves the index once
no argument yields it any more, even when its target lies outside the folder."""

from __future__ import annotations

from pathlib import Path

import lancedb
import pytest

from propdex.sources import discover
from propdex.store import Index

NOTE = "# Herons\n\nHerons nest in tall trees near water. Herons eat fish and frogs.\n"


def _note(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(NOTE.replace("Herons", path.stem), encoding="utf-8")
    return path.resolve()


def _indexed(db: Path) -> list[str]:
    return sorted(d["source"] for d in Index.open(str(db), create=False).documents())


def _ingest(sources: list[Path], db: Path) -> dict:
    from flows.ingest import ingest

    return ingest(sources=[str(s) for s in sources], db=str(db))


def test_a_linked_folder_is_walked(tmp_path):
    target = _note(tmp_path / "elsewhere" / "a.md")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)

    assert [str(target)] == discover([str(tmp_path / "folder")]).files


def test_a_link_loop_inside_a_linked_folder_ends(tmp_path):
    target = _note(tmp_path / "elsewhere" / "a.md")
    (tmp_path / "elsewhere" / "again").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)

    assert [str(target)] == discover([str(tmp_path / "folder")]).files


@pytest.mark.prefect
def test_a_linked_file_outside_the_folder_leaves_when_the_link_is_deleted(tmp_path):
    target = _note(tmp_path / "elsewhere" / "a.md")
    kept = _note(tmp_path / "folder" / "b.md")
    (tmp_path / "folder" / "a.md").symlink_to(target)
    _ingest([tmp_path / "folder"], tmp_path / "db")
    (tmp_path / "folder" / "a.md").unlink()

    summary = _ingest([tmp_path / "folder"], tmp_path / "db")

    assert ([str(target)], [str(kept)]) == (summary["removed"], _indexed(tmp_path / "db"))


@pytest.mark.prefect
def test_a_removed_folder_link_takes_its_documents_out(tmp_path):
    target = _note(tmp_path / "elsewhere" / "deep" / "a.md")
    kept = _note(tmp_path / "folder" / "b.md")
    (tmp_path / "folder" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    _ingest([tmp_path / "folder"], tmp_path / "db")
    (tmp_path / "folder" / "linked").unlink()

    summary = _ingest([tmp_path / "folder"], tmp_path / "db")

    assert ([str(target)], [str(kept)]) == (summary["removed"], _indexed(tmp_path / "db"))


@pytest.mark.prefect
def test_a_target_linked_from_two_folders_stays_until_both_links_are_gone(tmp_path):
    target = _note(tmp_path / "elsewhere" / "a.md")
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        _note(folder / "own.md")
        (folder / "a.md").symlink_to(target)
        _ingest([folder], tmp_path / "db")
    (first / "a.md").unlink()
    _ingest([first], tmp_path / "db")
    after_one = str(target) in _indexed(tmp_path / "db")
    (second / "a.md").unlink()
    _ingest([second], tmp_path / "db")

    assert (True, False) == (after_one, str(target) in _indexed(tmp_path / "db"))


@pytest.mark.prefect
def test_an_index_made_before_found_at_learns_it_and_prunes_a_deleted_link(tmp_path):
    target = _note(tmp_path / "elsewhere" / "a.md")
    kept = _note(tmp_path / "folder" / "b.md")
    (tmp_path / "folder" / "a.md").symlink_to(target)
    _ingest([tmp_path / "folder"], tmp_path / "db")
    lancedb.connect(str(tmp_path / "db")).open_table("documents").drop_columns(["found_at"])
    _ingest([tmp_path / "folder"], tmp_path / "db")  # unchanged: records where a.md was found
    (tmp_path / "folder" / "a.md").unlink()

    summary = _ingest([tmp_path / "folder"], tmp_path / "db")

    assert ([str(target)], [str(kept)]) == (summary["removed"], _indexed(tmp_path / "db"))
