"""Turning the paths a user gives (files, folders, globs) into the documents of a run."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

from propdex.ids import normalise_source

SUPPORTED_SUFFIXES = (".pdf", ".txt", ".md", ".markdown")
_GLOB_CHARS = set("*?[")


@dataclass
class Discovery:
    files: list[str] = field(default_factory=list)  # normalised absolute paths, sorted, unique
    roots: list[str] = field(default_factory=list)  # folders walked: their removed files get pruned
    missing: list[str] = field(default_factory=list)  # arguments that matched nothing


def is_supported(path: str | Path) -> bool:
    return Path(path).suffix.lower() in SUPPORTED_SUFFIXES


def _walk(folder: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if not name.startswith(".") and is_supported(name):
                found.append(normalise_source(Path(dirpath) / name))
    return found


def discover(arguments: list[str]) -> Discovery:
    """Expand files, folders (walked for .pdf/.txt/.md) and globs.

    A file named explicitly is kept whatever its suffix, so that the run reports why it
    cannot be read instead of silently ignoring it.
    """
    result = Discovery()
    seen: set[str] = set()

    def add(path: str) -> None:
        if path not in seen:
            seen.add(path)
            result.files.append(path)

    for argument in arguments:
        expanded = os.path.expanduser(argument)
        if Path(expanded).is_dir():
            result.roots.append(normalise_source(expanded))
            for path in _walk(Path(expanded)):
                add(path)
        elif Path(expanded).is_file():
            add(normalise_source(expanded))
        elif _GLOB_CHARS & set(expanded):
            matches = sorted(glob.glob(expanded, recursive=True))
            files = [m for m in matches if Path(m).is_file() and is_supported(m)]
            for folder in (m for m in matches if Path(m).is_dir()):
                files.extend(_walk(Path(folder)))
            if not files:
                result.missing.append(argument)
            for path in files:
                add(normalise_source(path))
        else:
            result.missing.append(argument)
    result.files.sort()
    return result


def is_under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)
