"""Path policy: which files a run may read.

Runs triggered from the Prefect UI or by events take paths from whoever filled the form or
emitted the event. With ``allowed_roots`` set, a path is read only when its fully resolved
form (every symlink followed, every ``..`` collapsed) lies under one of the resolved roots,
so neither a symlink nor ``..`` can lead out. The check happens before anything is opened,
hashed or listed, and again right before a file is extracted (the file may have been
swapped for a symlink in between). With no roots (the CLI's default) every path is allowed.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from propdex.errors import DatabaseNotAllowedError, PathNotAllowedError


def resolved(path: str | os.PathLike[str]) -> str:
    """``path`` made absolute with every symlink followed and ``..`` collapsed."""
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def resolved_roots(roots: list[str]) -> list[str]:
    return [resolved(root) for root in roots]


def is_within(path: str, roots: list[str]) -> bool:
    """Whether the already resolved ``path`` is one of ``roots`` or lies below one."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def refusal(path: str, roots: list[str]) -> str:
    shown = ", ".join(roots)
    target = resolved(path)
    how = "resolves to" if os.path.abspath(os.path.expanduser(path)) != target else "is"
    return f"refused: {how} {target}, outside the allowed roots ({shown})"


def check_allowed(path: str | os.PathLike[str], roots: list[str]) -> str:
    """The resolved path when reading it is allowed, else PathNotAllowedError naming it."""
    target = resolved(path)
    if not roots:
        return target
    allowed = resolved_roots(roots)
    if not is_within(target, allowed):
        raise PathNotAllowedError(os.fspath(path), refusal(os.fspath(path), allowed))
    return target


def check_pattern(pattern: str, roots: list[str]) -> str:
    """The glob to expand: ``pattern`` made absolute with ``..`` collapsed (so no wildcard
    match can climb out), refused when its fixed leading folders resolve outside the roots
    (globbing would list folders there before any match could be checked)."""
    if not roots:
        return pattern
    normal = os.path.normpath(os.path.abspath(os.path.expanduser(pattern)))
    fixed: list[str] = []
    for part in Path(normal).parts:
        if glob.has_magic(part):
            break
        fixed.append(part)
    folder = os.path.join(*fixed)
    try:
        check_allowed(folder, roots)
    except PathNotAllowedError as refused:
        raise PathNotAllowedError(pattern, refused.reason) from None
    return normal


def roots_of_sources(sources: list[str], base: str | os.PathLike[str]) -> list[str]:
    """The folders a list of ingest sources covers, relative paths taken from ``base``: a
    folder itself, a file's parent folder, a glob's fixed leading folders, an object-store
    URI itself. A deployment's
    default ``sources`` become the allowed roots of its runs when none are configured."""
    roots: list[str] = []
    for source in sources:
        if "://" in source:
            # An object-store prefix (or object) is its own root, compared by URI segments.
            root = source.rstrip("/")
            if root not in roots:
                roots.append(root)
            continue
        path = os.path.join(os.fspath(base), os.path.expanduser(source))
        if glob.has_magic(path):
            fixed = []
            for part in Path(os.path.normpath(path)).parts:
                if glob.has_magic(part):
                    break
                fixed.append(part)
            folder = os.path.join(*fixed)
        else:
            folder = path if not os.path.isfile(path) else os.path.dirname(path)
        root = resolved(folder)
        if root not in roots:
            roots.append(root)
    return roots


def _uri_parts(uri: str) -> list[str]:
    scheme, _, rest = uri.partition("://")
    return [scheme.lower(), *[part for part in rest.split("/") if part]]


def _uri_within(uri: str, roots: list[str]) -> bool:
    parts = _uri_parts(uri)
    allowed = [_uri_parts(root) for root in roots if "://" in root]
    return ".." not in parts and any(parts[:len(root)] == root for root in allowed)


def check_uri_allowed(uri: str, roots: list[str]) -> str:
    """An object-store source ``uri`` when no roots are set or it lies under a URI root (by
    segments; a ``..`` segment is refused), else PathNotAllowedError naming it."""
    if roots and not _uri_within(uri, roots):
        shown = ", ".join(roots)
        raise PathNotAllowedError(uri, f"refused: is {uri}, outside the allowed roots ({shown})")
    return uri


def check_db_allowed(db: str, roots: list[str], base: str | os.PathLike[str]) -> str:
    """``db`` (a folder, relative to ``base``, or an object-store URI) when it is one of
    ``roots`` or lies below one, else DatabaseNotAllowedError with the refusal message
    sources get. A folder is compared resolved (symlinks, ``..``); a URI by its segments,
    and one with a ``..`` segment is refused outright."""
    if "://" in db:
        if _uri_within(db, roots):
            return db
        shown = ", ".join(root for root in roots)
        raise DatabaseNotAllowedError(db, f"refused: is {db}, outside the allowed database "
                                          f"roots ({shown})")
    target = os.path.join(os.fspath(base), os.path.expanduser(db))
    folders = [resolved(os.path.join(os.fspath(base), os.path.expanduser(root)))
               for root in roots if "://" not in root]
    if is_within(resolved(target), folders):
        return resolved(target)
    raise DatabaseNotAllowedError(
        db, refusal(target, folders).replace("the allowed roots", "the allowed database roots"))
