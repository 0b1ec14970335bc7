"""An index's tables opened for reading through LanceDB's asynchronous API, and the messages
Lance's failures give users.

LanceDB writes each table as the Lance dataset ``<index>/<name>.lance``. A reader keeps one
asynchronous connection and its tables (propdex.search.rankings) and runs each read as one
coroutine on LanceDB's background event loop: the synchronous API makes a round trip to that
loop for every call and every batch, a cost each search would pay several times over.
"""

from __future__ import annotations

import os
import re
from collections.abc import Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from propdex.errors import PropdexError, StorageError

T = TypeVar("T")

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


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """``coroutine`` run to its end on LanceDB's background event loop (the one its
    synchronous API runs on), from any thread but that loop's."""
    from lancedb.background_loop import LOOP

    return LOOP.run(coroutine)


async def connect(index_uri: str, storage_options: dict[str, str] | None) -> Any:
    """An asynchronous LanceDB connection to the index at ``index_uri``. Its tables stay at
    the version last checked out rather than looking for a newer one at every call: a reader
    checks out each table's latest version once per search (``checkout_latest``)."""
    import lancedb

    return await lancedb.connect_async(index_uri, storage_options=storage_options)


async def open_table(db: Any, name: str) -> Any:
    """Table ``name`` opened on the asynchronous connection ``db``, or None when the index
    has no such table."""
    try:
        return await db.open_table(name)
    except (FileNotFoundError, ValueError) as exc:
        if "not found" not in str(exc).lower():
            raise
        return None  # an object store without the table


def index_folder_missing(index_uri: str) -> bool:
    """Whether a local index's folder does not exist (never true of an object store, where
    only opening a table tells)."""
    return "://" not in index_uri and not os.path.exists(index_uri)


def table_folder(index_uri: str, name: str) -> tuple[int, int] | None:
    """Which folder holds table ``name`` now, as (device, inode) of its ``_versions``: None
    for a local index without it; (0, 0) in an object store, where only opening the table
    tells. A folder removed and re-created, or replaced by another index's, has another."""
    uri = dataset_uri(index_uri, name)
    if "://" in uri:
        return (0, 0)
    try:
        found = os.stat(Path(uri) / "_versions")
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


async def read_rows(table: Any, stored: set[str], columns: Sequence[str],
                    where: str | None = None) -> pa.Table:
    """Rows of the asynchronous LanceDB ``table``, whose columns are ``stored``, with
    ``columns`` (a column an older index lacks reads as null, as in Index.read_batches),
    filtered by ``where``."""
    query = table.query().select([c for c in columns if c in stored])
    if where is not None:
        query = query.where(where)
    return with_absent_columns(await query.to_arrow(), stored, columns)


def with_absent_columns(rows: pa.Table, stored: set[str], columns: Sequence[str]) -> pa.Table:
    """``rows`` with those ``columns`` that are not ``stored`` added as nulls, in the order
    of ``columns`` and then any other column of ``rows`` (a score)."""
    for column in columns:
        if column not in stored:
            rows = rows.append_column(column, pa.nulls(rows.num_rows))
    return rows.select([*columns, *(c for c in rows.column_names if c not in columns)])
