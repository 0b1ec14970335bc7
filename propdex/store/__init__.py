"""LanceDB storage: the documents, chunks and propositions tables and their upkeep."""

from propdex.store.lazy_client import defer_rest_namespace_client

defer_rest_namespace_client()  # before lancedb is imported: see lazy_client.py

from propdex.store.index import (  # noqa: E402
    ATTEMPT_COLUMNS,
    FAILURE_COLUMNS,
    VECTOR_INDEX_THRESHOLD,
    Index,
    Replacement,
)
from propdex.store.predicates import in_list, sql_string  # noqa: E402
from propdex.store.schema import CHUNKS, DOCUMENTS, PROPOSITIONS, TABLES  # noqa: E402

__all__ = [
    "ATTEMPT_COLUMNS",
    "CHUNKS",
    "DOCUMENTS",
    "FAILURE_COLUMNS",
    "Index",
    "PROPOSITIONS",
    "Replacement",
    "TABLES",
    "VECTOR_INDEX_THRESHOLD",
    "in_list",
    "sql_string",
]
