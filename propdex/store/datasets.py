"""An index's tables read through pylance, the Lance format's own library, without LanceDB.

Why: LanceDB is a layer over Lance, and importing it costs a one-shot `propdex search` most
of its start-up (0.6-0.8 s of CPU on the 2-core AVX2 EPYC, `python -X importtime`, against
0.12-0.18 s for pylance), while the reads a search makes -- a vector search through the
table's IVF index, a full-text search through its inverted index, rows by a filter -- are
Lance's own, which pylance calls as directly. A long-running reader's refreshes read through
it too: a LanceDB query costs at least 6 ms of CPU, a fragment read through pylance about 1
(propdex.resident.fragments).

LanceDB writes each table as the Lance dataset ``<index>/<name>.lance``; a dataset is
opened at its latest version, or at one asked for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from propdex.errors import StorageError

# Lance appends the Rust source line that raised (", /root/.cargo/.../writer.rs:258:9"):
# noise in a message for users.
_RUST_LOCATION = re.compile(r",\s*\S+\.rs:\d+:\d+")


def lance_reason(exc: BaseException) -> str:
    """A Lance or LanceDB error's message without the Rust source line that raised it."""
    return _RUST_LOCATION.sub("", str(exc))


def dataset_uri(index_uri: str, name: str) -> str:
    """Where LanceDB keeps table ``name`` of the index at ``index_uri`` (an absolute folder
    or an object-store URI)."""
    return f"{index_uri.rstrip('/')}/{name}.lance"


def open_dataset(index_uri: str, name: str, *, version: int | None = None,
                 storage_options: dict[str, str] | None = None) -> Any:
    """The Lance dataset of table ``name`` (at ``version``; None: the latest), or None when
    the index has no such table. StorageError names the index for any other failure."""
    import lance

    uri = dataset_uri(index_uri, name)
    if "://" not in uri and not (Path(uri) / "_versions").is_dir():
        return None  # a local index without the table (or no index at all)
    try:
        return lance.dataset(uri, version=version, storage_options=storage_options)
    except (FileNotFoundError, ValueError) as exc:
        if "://" in uri and "not found" in str(exc).lower():
            return None  # an object store without the table
        raise StorageError(f"cannot open table {name} in the index at {index_uri}: "
                           f"{lance_reason(exc)}") from exc


def select_stored(stored: set[str], columns: Sequence[str],
                  read: Callable[[list[str]], list[dict]]) -> list[dict]:
    """``read`` of those ``columns`` that are ``stored``, the others set to null on each row:
    a column an index written by an older propdex lacks reads as null (as in read_rows)."""
    absent = [c for c in columns if c not in stored]
    rows = read([c for c in columns if c in stored])
    for row in rows if absent else ():
        row.update(dict.fromkeys(absent))
    return rows


def read_rows(dataset: Any, columns: Sequence[str], where: str | None = None, *,
              fragments: Iterable[Any] | None = None, limit: int | None = None) -> pa.Table:
    """Rows of ``dataset`` with ``columns`` (a column an older index lacks reads as null, as
    in Index.read_batches), filtered by ``where``, from ``fragments`` only when given."""
    stored = set(dataset.schema.names)
    table = dataset.scanner(columns=[c for c in columns if c in stored], filter=where,
                            fragments=None if fragments is None else list(fragments),
                            limit=limit).to_table()
    for column in columns:
        if column not in stored:
            table = table.append_column(column, pa.nulls(table.num_rows))
    return table.select(list(columns))
