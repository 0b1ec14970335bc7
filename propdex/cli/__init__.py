"""The `propdex` command (propdex.cli.main) and its helpers: the ingest's progress display
(propdex.cli.progress) and its lower CPU priority (propdex.cli.priority)."""

from propdex.cli.main import (
    EXIT_FAILED_DOCS,
    EXIT_INCONSISTENT,
    EXIT_OK,
    EXIT_STOPPED,
    EXIT_STORAGE,
    EXIT_USAGE,
    build_parser,
    ingest_options,
    main,
    run,
)

__all__ = [
    "EXIT_FAILED_DOCS",
    "EXIT_INCONSISTENT",
    "EXIT_OK",
    "EXIT_STOPPED",
    "EXIT_STORAGE",
    "EXIT_USAGE",
    "build_parser",
    "ingest_options",
    "main",
    "run",
]
