"""Bounds on what one request may ask for, shared by the HTTP service and the MCP tools."""

from typing import Annotated

from pydantic import AfterValidator, Field

from propdex.metadata import MAX_FILTER_ENTRIES, MAX_VALUE_CHARS, MetadataInput, filter_entries

MAX_K = 100
MAX_DOC_IDS = 1000
MAX_ID_CHARS = 512  # doc_id, chunk_id and source glob lengths (ids are ~40-100 characters)
# Ids and globs come straight from a request; NUL is part of no stored id or path.
ID_PATTERN = r"^[^\x00]+$"


WhereValue = Annotated[str | int | float | bool, Field(union_mode="left_to_right")]


def _checked_where(where: MetadataInput | None) -> MetadataInput | None:
    filter_entries(where)  # a MetadataError (a ValueError) is the request's 422
    return where


# A metadata filter: key -> value or values, every one required. The pydantic bounds stop an
# oversized filter before propdex.metadata's rules name the first broken one.
Where = Annotated[
    dict[Annotated[str, Field(max_length=MAX_VALUE_CHARS)],
         WhereValue | Annotated[list[WhereValue], Field(max_length=MAX_FILTER_ENTRIES)]]
    | None,
    Field(max_length=MAX_FILTER_ENTRIES,
          description="metadata every result's document must hold: key -> value or list of "
                      "values, all required (AND)"),
    AfterValidator(_checked_where),
]
