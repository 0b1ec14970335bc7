"""Ctrl-C (SIGINT) during a command, always reported: `propdex: interrupted`, exit code 130.

Python turns Ctrl-C into a KeyboardInterrupt raised in the main thread, wherever it is, and
code there may catch it and go on. A Prefect flow run does: one that lands after the run's
final state was recorded (its end, its state hooks) is logged at debug level and dropped
(prefect.flow_engine: "BaseException was raised after user code finished executing"), and
the flow returns its result as if nothing happened; the CLI would then report a finished
run and exit 0, and a script would take the index for complete. Once the command has
returned, the process still stops Prefect's API and the extraction workers and joins
threads; a KeyboardInterrupt there is printed as an ignored exception and leaves the exit
status as it was.

So the SIGINT handler notes Ctrl-C before it raises KeyboardInterrupt (``watched``), and the
command's exit code is EXIT_INTERRUPTED whenever it was noted, whatever became of the
exception. While the exit code is decided and the process ends, Ctrl-C is only noted
(``CtrlC.raising`` off). In the CLI's own process (``watched_until_exit``) a noted Ctrl-C
makes the exit status 130 once the exit handlers have run, and a second Ctrl-C, or one
once the command has returned, ends the process at once, without waiting for a request in flight (what the process started ends
with it: Prefect's API and the extraction workers stop when their stdin closes).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_INTERRUPTED = 128 + signal.SIGINT  # as a shell reports a command ended by Ctrl-C
MESSAGE = "propdex: interrupted"


class CtrlC:
    """Whether Ctrl-C came while this handled SIGINT; it raises KeyboardInterrupt in the
    main thread as Python's own handler does while ``raising``."""

    def __init__(self) -> None:
        self.received = False
        self.raising = True
        self.reported = False  # MESSAGE printed

    def report(self) -> int:
        """Say on stderr, once, that the command was interrupted; EXIT_INTERRUPTED."""
        if not self.reported:
            self.reported = True
            print(MESSAGE, file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED

    def handle(self, _signum: int, _frame: object) -> None:
        self.received = True
        if self.raising:
            raise KeyboardInterrupt


class ProcessCtrlC(CtrlC):
    """The CtrlC of the CLI's process: a noted Ctrl-C makes the exit status 130 once the
    exit handlers ran; a second one, or one that comes once the command has returned, ends
    the process at once."""

    def handle(self, signum: int, frame: object) -> None:
        # Once the command has returned, what is left is stopping what it started, such as
        # Prefect's API recording the run's last task states (up to its drain limit): the
        # user who presses Ctrl-C then wants the prompt back, and the API goes on recording
        # by itself, as it stops when its stdin closes.
        if self.received or not self.raising:
            self.end_now()
        super().handle(signum, frame)

    def end_now(self) -> None:
        """Exit with EXIT_INTERRUPTED now, without the interpreter's own end: it could only
        wait for threads (an LLM request in flight) or print what their objects' finalizers
        raise once modules are torn down. What the run committed stays: each document's
        commit is whole or absent, even when the process is killed."""
        for stream in (sys.stdout, sys.stderr):
            # A closed or broken pipe, or a stream the interrupted code was writing to.
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                stream.flush()
        if not self.reported:
            os.write(2, f"{MESSAGE}\n".encode())  # not print: stderr's buffer may be in use
        os._exit(EXIT_INTERRUPTED)

    def exit_if_received(self) -> None:
        if self.received:
            self.end_now()


def _can_handle() -> bool:
    """Only the main thread sets signal handlers, and only Python's default handler is
    replaced: SIGINT ignored (a background job of a non-interactive shell, nohup) stays
    ignored, and a caller's own handler stays in place."""
    return (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)


@contextmanager
def watched() -> Iterator[CtrlC]:
    """Ctrl-C in the block is noted in the CtrlC given, then raised; Python's handler is back
    after the block. When it cannot be handled here, the CtrlC never notes anything."""
    ctrl_c = CtrlC()
    if not _can_handle():
        yield ctrl_c
        return
    signal.signal(signal.SIGINT, ctrl_c.handle)
    try:
        yield ctrl_c
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def watched_until_exit() -> CtrlC:
    """A CtrlC for the rest of the process. Its exit handler is registered now, before the
    command imports what registers theirs (Prefect, the extraction workers, Prefect's API),
    so that it runs after them (exit handlers run last registered, first run)."""
    if not _can_handle():
        return CtrlC()
    ctrl_c = ProcessCtrlC()
    signal.signal(signal.SIGINT, ctrl_c.handle)
    atexit.register(ctrl_c.exit_if_received)
    return ctrl_c
