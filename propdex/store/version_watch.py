"""Whether a local table may have a new version, told by a stat of a folder, not by LanceDB.

Why: a long-running reader (the resident index behind `propdex serve`) polls the documents
table's version ten times a second to take in commits, and each poll through LanceDB cost CPU
in Python and in LanceDB's threads: an idle service over 100k propositions used 17 ms of CPU
per second doing nothing else, and beside searches each poll hands the GIL around.

How: a commit writes a new manifest into the table's ``_versions`` folder, which moves the
folder's modification time. While that time is what it was when LanceDB was last asked, no
commit landed since, with two precautions: a folder changed within the last QUIET_SECONDS is
asked about anyway (a file system stamps changes with a coarse clock, so a second commit in
the same tick as the last one seen would leave the stamp as it was), and LanceDB is asked at
least every MAX_TRUST_SECONDS whatever the folder says. Without a local folder (an object
store, a layout this does not know) every poll asks LanceDB, as before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

QUIET_SECONDS = 1.0
MAX_TRUST_SECONDS = 5.0


class VersionWatch:
    """Tells a poller when to ask LanceDB for a table's version. Not thread-safe: one poller."""

    def __init__(self, folder: Path | None):
        self.folder = folder  # the table's _versions folder, or None: always ask
        self._asked: tuple[int, int] | None = None  # (mtime ns, inode) when last asked
        self._asked_at = -float("inf")  # time.monotonic() of that
        self._pending: tuple[int, int] | None = None

    def needs_asking(self) -> bool:
        """Whether a commit may have landed since the last ``asked()``. When True, ask
        LanceDB, then call ``asked()``."""
        stamp = self._stamp()
        self._pending = stamp
        return (stamp is None or stamp != self._asked
                or time.monotonic() - self._asked_at >= MAX_TRUST_SECONDS
                or time.time_ns() - stamp[0] < QUIET_SECONDS * 1e9)

    def asked(self) -> None:
        """LanceDB was asked after the last ``needs_asking()``: its stamp is the one seen."""
        self._asked = self._pending
        self._asked_at = time.monotonic()

    def _stamp(self) -> tuple[int, int] | None:
        if self.folder is None:
            return None
        try:
            status = os.stat(self.folder)
        except OSError:  # not there (yet): the table may be created any moment
            return None
        return status.st_mtime_ns, status.st_ino
