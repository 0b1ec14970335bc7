"""Storage faults: a database folder that turns read-only or fills up stops `propdex ingest`
with exit code 4 and a message naming the database, and leaves the existing index intact.

The database lives on a real, size-limited tmpfs mount: remounted read-only for one
scenario, filled by a filler file for the other. Mounting needs root (CAP_SYS_ADMIN); without
it the tests skip. The LLM/embedding cache (PROPDEX_CACHE_DIR) and PREFECT_HOME stay off the
mount, so LanceDB alone meets the fault. One scenario per mount, shared by the tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_capture import run_cli

pytestmark = pytest.mark.prefect

MOUNT_MB = 24
LEFT_FREE = 16 * 1024  # bytes left on the full disk: less than the new document's rows need
BASALT_V1 = ("Basalt is a fine-grained volcanic rock. It forms from the rapid cooling of lava "
             "rich in magnesium and iron.\n")
BASALT_V2 = BASALT_V1 + "Columnar basalt forms hexagonal columns as thick flows cool.\n"
# A new document whose chunk rows (text and vectors) need far more than LEFT_FREE bytes.
LARGE = "\n\n".join(
    f"Survey {n} measured the granite outcrop number {n} at {n * 7 % 300} metres of altitude. "
    f"The samples of outcrop {n} held quartz, feldspar and mica in varying proportions."
    for n in range(150)
) + "\n"


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def tmpfs(folder: Path) -> Iterator[Path]:
    """A MOUNT_MB tmpfs at ``folder``, unmounted on exit whatever happened."""
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the database needs root (CAP_SYS_ADMIN)")
    try:
        _mount("-t", "tmpfs", "-o", f"size={MOUNT_MB}m", "tmpfs", str(folder))
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        pytest.skip(f"cannot mount a tmpfs for the database (needs CAP_SYS_ADMIN): {detail}")
    try:
        yield folder
    finally:
        # A lazy unmount when something still holds a file open: the mount never outlives the test.
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(folder)], check=True, capture_output=True)


def fill(folder: Path, leave: int) -> Path:
    """Take all but ``leave`` bytes of the file system at ``folder``."""
    stats = os.statvfs(folder)
    filler = folder / "filler"
    with filler.open("wb") as out:
        os.posix_fallocate(out.fileno(), 0, stats.f_bavail * stats.f_frsize - leave)
    return filler



def read_only(mount: Path, docs: Path) -> None:
    """The database folder turns read-only; the indexed document then changes."""
    _mount("-o", "remount,ro", str(mount))
    (docs / "basalt.txt").write_text(BASALT_V2, encoding="utf-8")


def writable(mount: Path) -> None:
    _mount("-o", "remount,rw", str(mount))


def disk_full(mount: Path, docs: Path) -> None:
    """The disk holding the database fills up; a new, larger document arrives."""
    fill(mount, LEFT_FREE)
    (docs / "survey.txt").write_text(LARGE, encoding="utf-8")


def space_freed(mount: Path) -> None:
    (mount / "filler").unlink()


# scenario -> (inflict the fault, undo it, the OS reason the message must give)
SCENARIOS = {
    "read-only": (read_only, writable, "Read-only file system"),
    "disk full": (disk_full, space_freed, "No space left on device"),
}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def fault_run(request, tmp_path_factory) -> Iterator[dict]:
    """Index basalt.txt on a tmpfs, inflict the fault, ingest again; search and status are
    read during the fault, verify after the folder is writable again."""
    root = tmp_path_factory.mktemp("storage")
    docs = root / "docs"
    docs.mkdir()
    (docs / "basalt.txt").write_text(BASALT_V1, encoding="utf-8")
    with pytest.MonkeyPatch.context() as env, tmpfs(root / "mnt") as mount:
        env.setenv("PROPDEX_CACHE_DIR", str(root / "cache"))  # off the mount
        db = str(mount / "db")
        first = run_cli("ingest", str(docs), "--db", db)
        inflict, undo, _ = SCENARIOS[request.param]
        inflict(mount, docs)
        code, out, err = run_cli("ingest", str(docs), "--db", db)
        search = run_cli("search", "fine-grained volcanic rock", "--db", db, "--level", "chunks",
                         "--json")
        status = run_cli("status", "--db", db, "--json")
        undo(mount)
        verify = run_cli("verify", "--db", db)
        yield {"scenario": request.param, "db": db, "docs": docs, "first": first, "code": code,
               "out": out, "err": err, "search": json.loads(search[1]),
               "status": json.loads(status[1]), "verify": verify}


def test_the_first_ingest_succeeded(fault_run):
    assert 0 == fault_run["first"][0]


def test_the_run_exits_with_the_storage_code(fault_run):
    assert 4 == fault_run["code"]


def test_the_message_names_the_database_and_the_reason(fault_run):
    lines = fault_run["err"].strip().splitlines()
    reason = SCENARIOS[fault_run["scenario"]][2]
    assert (1, True, True, True, False) == (
        len(lines), lines[0].startswith("propdex: ingest failed: cannot "),
        f" in the index at {fault_run['db']}: " in lines[0], reason in lines[0],
        ".rs:" in lines[0],  # no Rust source location from lance
    )


def test_no_traceback_reaches_the_user(fault_run):
    assert "Traceback" not in fault_run["out"] + fault_run["err"]


def test_the_indexed_version_stays_searchable(fault_run):
    top = fault_run["search"][0]
    expected = (str(fault_run["docs"] / "basalt.txt"), BASALT_V1.strip())
    assert expected == (top["source"], top["text"].strip())


def test_the_ledger_still_describes_the_indexed_version(fault_run):
    (row,) = fault_run["status"]
    expected = ("indexed", hashlib.sha256(BASALT_V1.encode("utf-8")).hexdigest())
    assert expected == (row["status"], row["content_sha256"])


def test_the_index_verifies_clean_once_writable(fault_run):
    assert (0, "index consistent\n") == fault_run["verify"][:2]
