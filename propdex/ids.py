"""Stable identifiers and content hashes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def normalise_source(path: str | os.PathLike[str]) -> str:
    """Absolute, symlink-resolved path (URIs pass through unchanged)."""
    text = os.fspath(path)
    if "://" in text:
        return text
    return str(Path(text).expanduser().resolve())


def doc_id_for(source: str) -> str:
    """doc_id is stable for a source: the same path always maps to the same id, so two
    paths holding identical bytes still get two documents with their own lineage."""
    return "doc_" + hashlib.sha256(normalise_source(source).encode("utf-8")).hexdigest()[:24]


def chunk_id_for(doc_id: str, ordinal: int, char_start: int, char_end: int) -> str:
    key = f"{doc_id}:{ordinal}:{char_start}:{char_end}"
    return "chk_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def prop_id_for(chunk_id: str, ordinal: int) -> str:
    return "prp_" + hashlib.sha256(f"{chunk_id}:{ordinal}".encode()).hexdigest()[:24]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike[str], block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            digest.update(chunk)
    return digest.hexdigest()
