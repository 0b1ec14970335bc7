"""Side-by-side benchmarks: another git revision's code in a temporary tree, and commands timed
in a fresh process with their peak RSS. The machine is shared and noisy, so a comparison
alternates the revisions round by round within one benchmark run."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def checkout(revision: str, into: Path) -> Path:
    """The tree of ``revision`` in ``into`` (git archive: no worktree to clean up)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def code_env(tree: Path, **extra: str) -> dict[str, str]:
    """An environment importing propdex from ``tree``, free of the caller's PROPDEX_* and
    PREFECT_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROPDEX_", "PREFECT_"))}
    env.update(PYTHONPATH=str(tree), **extra)
    return env


@dataclass
class Measured:
    seconds: float
    cpu_seconds: float  # user + system, with the children it waited for (Prefect's server)
    peak_rss_mib: float  # of the command's own process (not its children)
    stdout: str


def measured(command: list[str], cwd: Path, env: dict[str, str]) -> Measured:
    """Run ``command``; SystemExit with its stderr when it fails (exit code 1, some documents
    failed, is still a measurement)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
        # wait4, not wait: the rusage of this one process gives its peak RSS.
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(command)} exited {process.returncode}:\n{err.read()[-3000:]}")
        cpu = usage.ru_utime + usage.ru_stime
        return Measured(seconds, cpu, usage.ru_maxrss / 1024, out.read())  # ru_maxrss: KiB
