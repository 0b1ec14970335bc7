"""Bounds on what one request may ask for: the search request every surface validates (the
HTTP service's body, the MCP tool's arguments, IndexReader.search's parameters), and the ids
and filters inside it."""

import functools
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, ValidationError, create_model

from propdex.errors import SearchRequestError
from propdex.metadata import MAX_FILTER_ENTRIES, MAX_VALUE_CHARS, MetadataInput, filter_entries
from propdex.search import DEFAULT_K, DEFAULT_LEVEL, DEFAULT_MODE, Level, Mode

MAX_K = 100
MAX_DOC_IDS = 1000
MAX_ID_CHARS = 512  # doc_id, chunk_id and source glob lengths (ids are ~40-100 characters)
# Ids and globs come straight from a request; NUL is part of no stored id or path.
ID_PATTERN = r"^[^\x00]+$"

Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, pattern=ID_PATTERN)]
# Strict: a JSON "3" or true is a client's mistake, not a number of results.
K = Annotated[int, Field(strict=True, ge=1, le=MAX_K, description=f"results wanted (1-{MAX_K})")]

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


def _searchable(query: str) -> str:
    # NUL is part of no stored text; a query of spaces alone has no word to rank by.
    if "\x00" in query:
        raise ValueError("must not contain a NUL character")
    if not query.strip():
        raise ValueError("must contain a non-space character")
    return query


def query_type(max_query_chars: int) -> Any:
    """The ``query`` of a search: 1 to ``max_query_chars`` characters, not only spaces."""
    return Annotated[str, Field(min_length=1, max_length=max_query_chars,
                                description="the question or keywords"),
                     AfterValidator(_searchable)]


class SearchFields(BaseModel):
    """Fields of a search besides ``query`` (its length limit comes from settings)."""

    level: Level = Field(DEFAULT_LEVEL, description="propositions, chunks or both")
    mode: Mode = Field(DEFAULT_MODE, description="vector, fts (full-text) or hybrid")
    k: K = DEFAULT_K
    source: str | None = Field(None, min_length=1, max_length=MAX_ID_CHARS,
                               pattern=ID_PATTERN,
                               description="glob over source paths (fnmatch, case-sensitive)")
    doc_ids: list[Id] | None = Field(None, max_length=MAX_DOC_IDS,
                                     description="restrict to these documents")
    where: Where = None

    model_config = {"extra": "forbid"}


@functools.cache
def search_request_model(max_query_chars: int) -> type[BaseModel]:
    """The search request: ``query`` bounded by ``max_query_chars``, and SearchFields (one
    class per bound, shared by the service and the readers of one process)."""
    return create_model("SearchRequest", __base__=SearchFields,
                        query=(query_type(max_query_chars), ...))


def error_sentence(errors: list[dict[str, Any]]) -> str:
    """"k: Input should be less than or equal to 100; ..." from pydantic's or FastAPI's
    errors (locations starting with "body" or "path" name the field without them)."""
    parts = []
    for error in errors:
        location = [str(part) for part in error.get("loc", ()) if part not in ("body", "path")]
        # A validator's ValueError comes as "Value error, <its message>": the message says it.
        message = str(error.get("msg")).removeprefix("Value error, ")
        parts.append(f"{'.'.join(location) or 'body'}: {message}")
    return "; ".join(parts)


def checked_search(max_query_chars: int, fields: dict[str, Any]) -> BaseModel:
    """``fields`` (query, level, mode, k, ...) as a search request within the bounds, or
    SearchRequestError naming each field outside them."""
    try:
        return search_request_model(max_query_chars).model_validate(fields)
    except ValidationError as exc:
        raise SearchRequestError(error_sentence(exc.errors())) from None
