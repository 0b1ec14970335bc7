"""An index's tables opened for reading through LanceDB, and the rows read from them.

LanceDB writes each table as the Lance dataset ``<index>/<name>.lance``. A reader opens the
tables of one connection and keeps them (propdex.search.rankings); these helpers open one
table without creating anything, read rows by a filter, and turn Lance's errors into
messages for users.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from propdex.errors import PropdexError, StorageError

# Lance appends the Rust source line that raised (", /root/.cargo/.../writer.rs:258:9"):
# noise in a message for users.
_RUST_LOCATION = re.compile(r",\s*\S+\.rs:\d+:\d+")


def lance_reason(exc: BaseException) -> str:
    """A Lance or LanceDB error's message without the Rust source line that raised it."""
    return _RUST_LOCATION.sub("", str(exc))


@contextmanager
def storage_errors(failure: str) -> Iterator[None]:
    """Lance's and the OS's failures inside as StorageError("<failure>: <reason>"), where
    ``failure`` names the index; propdex's own errors pass through."""
    try:
        yield
    except PropdexError:
        raise
    except Exception as exc:  # lance raises RuntimeError, OSError, ValueError, ...
        raise StorageError(f"{failure}: {lance_reason(exc)}") from exc


def dataset_uri(index_uri: str, name: str) -> str:
    """Where LanceDB keeps table ``name`` of the index at ``index_uri`` (an absolute folder
    or an object-store URI)."""
    return f"{index_uri.rstrip('/')}/{name}.lance"


def connect_for_reading(index_uri: str, storage_options: dict[str, str] | None) -> Any:
    """A LanceDB connection to the index at ``index_uri`` whose tables stay at the version
    last checked out rather than looking for a newer one at every call: a reader checks out
    each table's latest version once per search (``checkout_latest``)."""
    import lancedb

    with storage_errors(f"cannot open the index at {index_uri}"):
        return lancedb.connect(index_uri, storage_options=storage_options)


def open_table(connect: Callable[[], Any], index_uri: str, name: str) -> Any:
    """Table ``name`` of the index at ``index_uri`` opened on the connection ``connect``
    gives, or None when the index has no such table (a local folder is looked at first, so
    that a missing index is never connected to). StorageError names the index for any other
    failure."""
    uri = dataset_uri(index_uri, name)
    if "://" not in uri and not (Path(uri) / "_versions").is_dir():
        return None  # a local index without the table (or no index at all)
    with storage_errors(f"cannot open table {name} in the index at {index_uri}"):
        try:
            return connect().open_table(name)
        except (FileNotFoundError, ValueError) as exc:
            if "not found" not in str(exc).lower():
                raise
            return None  # an object store without the table


def select_stored(stored: set[str], columns: Sequence[str],
                  read: Callable[[list[str]], list[dict]]) -> list[dict]:
    """``read`` of those ``columns`` that are ``stored``, the others set to null on each row:
    a column an index written by an older propdex lacks reads as null (as in read_rows)."""
    absent = [c for c in columns if c not in stored]
    rows = read([c for c in columns if c in stored])
    for row in rows if absent else ():
        row.update(dict.fromkeys(absent))
    return rows


def read_rows(table: Any, columns: Sequence[str], where: str | None = None) -> pa.Table:
    """Rows of the LanceDB ``table`` with ``columns`` (a column an older index lacks reads as
    null, as in Index.read_batches), filtered by ``where``."""
    stored = set(table.schema.names)
    query = table.search().select([c for c in columns if c in stored])
    if where is not None:
        query = query.where(where)
    rows = query.to_arrow()
    for column in columns:
        if column not in stored:
            rows = rows.append_column(column, pa.nulls(rows.num_rows))
    return rows.select(list(columns))
