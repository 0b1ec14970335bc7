"""Turning the paths a user gives (files, folders, globs) into the documents of a run."""

from __future__ import annotations

import fnmatch
import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

from propdex.errors import PathNotAllowedError
from propdex.ids import normalise_source
from propdex.security import check_allowed, check_pattern, is_within, refusal, resolved_roots

# As propdex.extract.SUPPORTED_SUFFIXES (not imported: walking needs none of extraction).
SUPPORTED_SUFFIXES = (".pdf", ".epub", ".xps", ".oxps", ".mobi", ".fb2", ".txt", ".md", ".markdown")
_GLOB_CHARS = set("*?[")


@dataclass
class Discovery:
    files: list[str] = field(default_factory=list)  # normalised absolute paths, sorted, unique
    roots: list[str] = field(default_factory=list)  # folders walked: their removed files get pruned
    patterns: list[str] = field(default_factory=list)  # absolute globs: removed matches get pruned
    missing: list[str] = field(default_factory=list)  # arguments that matched nothing
    missing_files: list[str] = field(default_factory=list)  # plain paths that no longer exist
    # Plain paths named, absolute with links not followed: what they led to before and no
    # longer does gets pruned.
    named: list[str] = field(default_factory=list)
    # source -> the paths it was found at: below the folder or glob match that found it,
    # links not resolved, so pruning can tell which argument yields it.
    found_at: dict[str, list[str]] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): never read
    # (printable path, reason): found, but a document cannot be made of them.
    unusable: list[tuple[str, str]] = field(default_factory=list)


# The index stores sources as UTF-8 text: a name that is not (Python holds its bytes as
# surrogates) can be neither stored nor hashed into a doc_id.
NOT_UTF8_REASON = "file name is not valid UTF-8: rename the file to index it"


def printable_path(path: str) -> str:
    """``path`` as UTF-8 text: the bytes of a name that is not valid UTF-8 become backslash
    escapes (b"\\xff" reads "\\xff"), so the path can be printed and stored."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def is_supported(path: str | Path) -> bool:
    return Path(path).suffix.lower() in SUPPORTED_SUFFIXES


@dataclass
class Walk:
    """What walking one folder found."""

    files: list[str] = field(default_factory=list)  # supported files, as walked (links kept)
    refused: list[str] = field(default_factory=list)  # linked folders outside the roots
    # Real path -> walked path of each folder walked (the folder itself too): each real
    # folder is walked once, so a path below a real folder has one walked path.
    folders: dict[str, str] = field(default_factory=dict)
    # Walked path -> real path of each supported file that is itself a link to a file.
    file_links: dict[str, str] = field(default_factory=dict)
    broken: list[str] = field(default_factory=list)  # links that lead nowhere (any name)


def walk(folder: str, roots: list[str] | None = None) -> Walk:
    """The supported files under ``folder`` and the linked folders refused (outside
    ``roots``, when given): links to files and to folders are both followed, as ``find -L``
    does. Each file is given as walked (below ``folder``, links not resolved). A folder is
    walked once by its real path, so a link loop ends; hidden names are skipped.

    As ``os.walk(followlinks=True)``, top-down (a folder's subfolders are all claimed before
    any is entered), a folder that cannot be listed skipped; on ``os.scandir`` directly, whose
    entries tell a link from a file without a system call per file."""
    found = Walk(folders={os.path.realpath(folder): folder})
    pending = [folder]
    while pending:
        subfolders = _walk_folder(pending.pop(), roots, found)
        pending.extend(reversed(subfolders))  # entered in name order
    return found


def _walk_folder(dirpath: str, roots: list[str] | None, found: Walk) -> list[str]:
    """Record the files of ``dirpath`` in ``found``; its subfolders to enter, claimed."""
    try:
        with os.scandir(dirpath) as listing:
            entries = [entry for entry in listing if not entry.name.startswith(".")]
    except OSError:
        return []
    subfolders: list[str] = []
    for entry in entries:
        try:
            is_folder = entry.is_dir()  # through a link
        except OSError:
            is_folder = False
        if is_folder:
            subfolders.append(entry.path)
            continue
        # A link to a folder that is gone is listed with the files. Links to files and broken
        # links are what `propdex watch` watches beyond the walked folders.
        if entry.is_symlink():
            real = os.path.realpath(entry.path)
            if not os.path.exists(real):
                found.broken.append(entry.path)
            elif is_supported(entry.name):
                found.file_links[entry.path] = real
        if is_supported(entry.name):
            found.files.append(entry.path)  # resolved (and checked) by the caller
    kept = []
    for path in sorted(subfolders):
        real = os.path.realpath(path)
        if roots and not is_within(real, roots):
            found.refused.append(path)  # listing it would read outside the roots
        elif real not in found.folders:
            found.folders[real] = path
            kept.append(path)
    return kept


def discover(arguments: list[str], allowed_roots: list[str] | None = None) -> Discovery:
    """Expand files, folders (walked for SUPPORTED_SUFFIXES) and globs.

    A file named explicitly is kept whatever its suffix, so that the run reports why it
    cannot be read instead of silently ignoring it. With ``allowed_roots``, an argument or
    a file found under it that resolves outside them is refused before it is listed or read.
    """
    result = Discovery()
    seen: set[str] = set()
    roots = resolved_roots(allowed_roots or [])

    def refuse(found: str) -> None:
        result.refused.append((printable_path(found), refusal(printable_path(found), roots)))

    def add(found: str) -> None:
        path = normalise_source(found)
        if roots and not is_within(path, roots):  # a symlink leading out of the roots
            refuse(found)
        elif printable_path(path) != path:
            # Reported as that file's failure: the other files of the run go on.
            result.unusable.append((printable_path(path), NOT_UTF8_REASON))
        else:
            if path not in seen:
                seen.add(path)
                result.files.append(path)
            places = result.found_at.setdefault(path, [])
            if os.path.abspath(found) not in places:
                places.append(os.path.abspath(found))

    def add_all(found: Walk) -> None:
        for path in found.files:
            add(path)
        for path in found.refused:
            refuse(path)

    for argument in arguments:
        expanded = os.path.expanduser(argument)
        try:
            if _GLOB_CHARS & set(expanded) and not os.path.lexists(expanded):
                expanded = check_pattern(expanded, roots)
            else:
                check_allowed(expanded, roots)
        except PathNotAllowedError as refused:
            result.refused.append((argument, refused.reason))
            continue
        if Path(expanded).is_dir():
            # Walked from its real path, so the paths found compare with the roots pruned.
            result.roots.append(normalise_source(expanded))
            add_all(walk(result.roots[-1], roots))
        elif Path(expanded).is_file():
            result.named.append(os.path.abspath(expanded))
            add(expanded)
        elif _GLOB_CHARS & set(expanded):
            result.patterns.append(os.path.abspath(expanded))
            matches = sorted(glob.glob(expanded, recursive=True))
            found = Walk(files=[m for m in matches if Path(m).is_file() and is_supported(m)])
            for folder in (m for m in matches if Path(m).is_dir()):
                below = walk(os.path.abspath(folder), roots)
                found.files.extend(below.files)
                found.refused.extend(below.refused)
            if not found.files:
                result.missing.append(argument)
            add_all(found)
        else:
            result.missing.append(argument)
            result.named.append(os.path.abspath(expanded))
            result.missing_files.append(normalise_source(expanded))
    result.files.sort()
    return result


def matches_any(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


is_under = is_within  # one definition of "lies under" for pruning and the path policy
