"""An ingest at a lower CPU priority, so that a `propdex serve` on the same machine keeps the
CPU its searches need (`propdex ingest --nice N`, PROPDEX_INGEST_NICE).

Why: an ingest is CPU-bound (embedding, Prefect's API) and takes every core it is given; at
the service's priority it leaves the service a fraction of a core, and the service's answers
slow down several times over (bench/RESULTS.md).

How: a niceness orders a process only against the processes of its own scheduling group,
and with autogroup scheduling (Linux's default on desktops and many servers) every session is
a group: `nice propdex ingest` in one terminal does not yield to a service started from
another. So the ingest goes on in a session of its own -- a forked child calls setsid(), as
setsid(1) does -- and that session's autogroup gets the niceness too. The parent waits,
passes on the signals a terminal sends (Ctrl-C), and exits with the child's status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

AUTOGROUP = Path("/proc/self/autogroup")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_at_lower_priority(nice: int) -> int | None:
    """Go on at niceness ``nice`` (0-19), in a session of its own when this process does not
    lead one, and say so on stderr. Returns None in the process that goes on; in the parent
    left waiting, the exit status to end with. Call it before any thread starts: only the
    calling thread survives a fork (with threads running, it stays in its session and sets
    only its niceness)."""
    if not 0 <= nice <= 19:
        raise ValueError(f"niceness must be between 0 and 19, not {nice}")
    if not hasattr(os, "fork"):
        raise ValueError("a lower ingest priority (--nice, PROPDEX_INGEST_NICE) needs a "
                         "POSIX system")
    if os.getsid(0) != os.getpid() and threading.active_count() == 1:
        # Held from before the fork until the parent forwards them: one arriving before that
        # ended the parent alone and left the ingest going on in its own session, out of
        # reach of the terminal's Ctrl-C (a busy host leaves that window open long enough).
        held = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        child = os.fork()
        if child:
            return _wait_forwarding_signals(child, held)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # what reached the parent is not the child's
        os.setsid()
    print(f"propdex: ingesting at a lower CPU priority ({lower_priority(nice)})",
          file=sys.stderr, flush=True)
    return None


def lower_priority(nice: int) -> str:
    """Set this process's niceness to ``nice`` unless it is already higher, and its
    session's autogroup's when it leads the session. Returns what was set, for the log."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, max(current, nice))  # raising it needs no privilege
    done = f"nice {os.getpriority(os.PRIO_PROCESS, 0)}"
    if os.getsid(0) == os.getpid():
        try:
            AUTOGROUP.write_text(str(nice))
            done += f", its own session, {AUTOGROUP.read_text().split('/')[-1].strip()}"
        except OSError:  # no autogroup scheduling in this kernel: the niceness is enough
            done += ", its own session"
    return done


def _wait_forwarding_signals(child: int, held: set[signal.Signals]) -> int:
    """Forward the signals of FORWARDED to ``child`` until it ends, those held since the fork
    first; its exit status. ``held``: the signal mask to restore once forwarding."""
    def forward(signum: int, _frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a signal held meanwhile arrives now
    _, status = os.waitpid(child, 0)  # retried after each forwarded signal (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says

