"""LanceDB storage: the documents, chunks and propositions tables and their upkeep."""

from propdex.store.index import Index
from propdex.store.maintenance import VECTOR_INDEX_THRESHOLD
from propdex.store.predicates import in_list, sql_string
from propdex.store.replacement import ATTEMPT_COLUMNS, FAILURE_COLUMNS, Replacement
from propdex.store.schema import CHUNKS, DOCUMENTS, PROPOSITIONS, TABLES

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
