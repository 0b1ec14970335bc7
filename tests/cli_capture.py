"""Running the CLI in-process with its output captured: module-scoped scenarios cannot use
capsys (function-scoped), so they capture stdout and stderr themselves."""

from __future__ import annotations

import contextlib
import io

from propdex.cli import main


def run_cli(*args: str) -> tuple[int, str, str]:
    """``propdex ARGS...``: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()
