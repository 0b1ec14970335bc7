"""Document metadata: KEY=VALUE pairs given at ingest, and the filters searches take.

A document's metadata maps keys to one or more values. It comes from three places, the more
specific winning key by key: the ingest's own pairs (``--meta``, the deployment's
``metadata`` parameter), then the Markdown front matter of the file, then a sidecar
``<file>.meta.json`` next to it. It is stored twice on the documents row -- ``metadata``, a
JSON object for people and programs, and ``meta``, the sorted "key=value" entries -- and the
entries are copied onto the document's chunks and propositions, where a filter is a Lance
prefilter over a label-list index (``array_has_all(meta, [...])``).

Keys and values are untrusted (file contents, run forms, HTTP bodies): a key is 1-64
characters without "=" or control characters (so an entry splits back at its first "="),
a value at most 256 characters without NUL, and there are at most 64 entries per document
and 16 per filter. A filter matches only documents holding every one of its entries; a key
or value no document has matches nothing.
"""

from __future__ import annotations

import datetime
import errno
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 256
MAX_DOCUMENT_ENTRIES = 64
MAX_FILTER_ENTRIES = 16
MAX_SIDECAR_BYTES = 64 * 1024
SIDECAR_SUFFIX = ".meta.json"
_MARKDOWN_SUFFIXES = (".md", ".markdown")

KEY_PATTERN = r"^[^=\x00-\x1f\x7f]{1,64}$"
_KEY = re.compile(KEY_PATTERN)

Metadata = dict[str, list[str]]  # key -> its values, each list sorted and distinct
MetadataInput = Mapping[str, Any]  # key -> a scalar or a list of scalars


class MetadataError(ValueError):
    """Metadata or a filter that breaks the rules above; ``field`` names where it came from."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def check_key(key: object, field: str) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise MetadataError(field, f"invalid key {str(key)[:80]!r}: 1-{MAX_KEY_CHARS} characters,"
                                   " no '=' and no control characters")
    return key


def _value_text(value: object, field: str) -> str:
    if isinstance(value, bool):  # before int: True is an int
        text = "true" if value else "false"
    elif isinstance(value, datetime.date):  # YAML front matter reads 2024-05-01 as a date
        text = value.isoformat()
    elif isinstance(value, (str, int, float)):
        text = str(value)
    else:
        raise MetadataError(field, f"a value must be text, a number or true/false, "
                                   f"not {type(value).__name__}")
    if len(text) > MAX_VALUE_CHARS or "\x00" in text:
        raise MetadataError(field, f"a value must be at most {MAX_VALUE_CHARS} characters "
                                   "without NUL")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MetadataError(field, "a value must be valid Unicode text") from None
    return text


def normalise(values: MetadataInput, field: str, *, limit: int = MAX_DOCUMENT_ENTRIES,
              ) -> Metadata:
    """``values`` (key -> scalar or list of scalars) as Metadata; MetadataError names the
    first rule broken."""
    if not isinstance(values, Mapping):
        raise MetadataError(field, "metadata must be an object of key: value pairs")
    result: Metadata = {}
    for key, value in values.items():
        check_key(key, field)
        listed = value if isinstance(value, (list, tuple)) else [value]
        texts = sorted({_value_text(v, f"{field}.{key}") for v in listed})
        if texts:
            result[key] = texts
    if sum(map(len, result.values())) > limit:
        raise MetadataError(field, f"at most {limit} key=value entries")
    return dict(sorted(result.items()))


def parse_pairs(pairs: Iterable[str], field: str, *, limit: int = MAX_DOCUMENT_ENTRIES,
                ) -> Metadata:
    """``KEY=VALUE`` strings (a repeated key collects its values) as Metadata."""
    collected: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise MetadataError(field, f"{pair[:80]!r} is not KEY=VALUE")
        collected.setdefault(key, []).append(value)
    return normalise(collected, field, limit=limit)


def merged(*layers: Metadata) -> Metadata:
    """The layers combined key by key, a later layer's values replacing an earlier one's."""
    result: Metadata = {}
    for layer in layers:
        result.update(layer)
    return dict(sorted(result.items()))


def entries(metadata: Metadata) -> list[str]:
    """The sorted "key=value" entries stored in the ``meta`` columns."""
    return sorted(f"{key}={value}" for key, values in metadata.items() for value in values)


def to_json(metadata: Metadata) -> str | None:
    """The documents row's ``metadata``: a key with one value holds it as a string."""
    if not metadata:
        return None
    return json.dumps({k: v[0] if len(v) == 1 else v for k, v in metadata.items()},
                      ensure_ascii=False, sort_keys=True)


def from_json(text: str | None) -> Metadata:
    """The Metadata a documents row's ``metadata`` holds ({} for none)."""
    return normalise(json.loads(text), "metadata") if text else {}


def filter_entries(where: MetadataInput | None, field: str = "where") -> list[str]:
    """The entries a filter requires (every one of them, AND); [] for no filter."""
    if not where:
        return []
    return entries(normalise(where, field, limit=MAX_FILTER_ENTRIES))


def split_front_matter(text: str) -> tuple[str | None, str]:
    """A Markdown text's YAML front matter block (None without one) and the text after it:
    a block opens with a "---" line at the top and closes with a "---" or "..." line."""
    stripped = text.lstrip("\ufeff")
    lines = stripped.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    end = next((n for n, line in enumerate(lines[1:], 1) if line.strip() in ("---", "...")),
               None)
    if end is None:
        return None, text
    return "".join(lines[1:end]), "".join(lines[end + 1:])


def front_matter(text: str, field: str) -> Metadata:
    """The YAML front matter at the top of a Markdown text ({} without one)."""
    block, _ = split_front_matter(text)
    if block is None:
        return {}
    import yaml

    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError as exc:
        raise MetadataError(field, f"front matter is not valid YAML: {exc}") from None
    if data is None:
        return {}
    return normalise(data, field)


def file_metadata(path: str) -> Metadata:
    """A file's own metadata: its Markdown front matter, then its sidecar ``<file>.meta.json``
    (whose keys win). MetadataError names the file and the reason."""
    result: Metadata = {}
    if Path(path).suffix.lower() in _MARKDOWN_SUFFIXES:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(MAX_SIDECAR_BYTES)
        result = front_matter(head, f"{path} (front matter)")
    sidecar = path + SIDECAR_SUFFIX
    try:
        with open(sidecar, "rb") as handle:
            raw = handle.read(MAX_SIDECAR_BYTES + 1)
    except OSError as exc:
        # A file whose name is already as long as names get cannot have a sidecar.
        if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG, errno.ENOTDIR):
            return result
        raise MetadataError(sidecar, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_SIDECAR_BYTES:
        raise MetadataError(sidecar, f"larger than {MAX_SIDECAR_BYTES} bytes")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise MetadataError(sidecar, f"not valid JSON: {exc}") from None
    return merged(result, normalise(data, sidecar))
