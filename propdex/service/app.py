"""The HTTP JSON service over one index (FastAPI): search, documents, chunks, health.

``create_app`` builds the application around one IndexReader, so the embedder is loaded once
and every request goes through IndexReader.search, the function `propdex search` calls.
Endpoints are plain (sync) functions: FastAPI runs them on its thread pool, and Lance and
the embedder release the GIL while they work.
"""

# No `from __future__ import annotations`: FastAPI reads the route signatures, and the
# SearchRequest model is a local variable a string annotation could not resolve.

import os
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from propdex import __version__
from propdex.api import IndexReader
from propdex.errors import IndexNotFoundError, PropdexError, SearchRequestError
from propdex.service.bounds import ID_PATTERN, MAX_ID_CHARS, search_request_model
from propdex.service.client import NO_INDEX
from propdex.service.errors import validation_body
from propdex.service.limits import BearerTokenMiddleware, BodySizeLimitMiddleware, json_bytes


def create_app(reader: IndexReader) -> FastAPI:
    """The application serving ``reader``'s index with its settings' limits and token."""
    settings = reader.settings
    app = FastAPI(
        title="propdex", version=__version__,
        description="Search a propdex index: propositions, chunks and their citations. "
                    "With PROPDEX_API_TOKEN set, every request needs "
                    "`Authorization: Bearer <token>`.",
    )
    SearchRequest = search_request_model(settings.api_max_query_chars)  # noqa: N806

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own body lists the errors; "error" names the fields in one sentence.
        return JSONResponse(status_code=422, content=validation_body(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Every error body has "error", as the 422s and the middleware's do: a 404, a 405, a
        # 400 for a body that is not UTF-8.
        return JSONResponse(status_code=exc.status_code, headers=exc.headers,
                            content={"error": exc.detail, "detail": exc.detail})

    @app.exception_handler(PropdexError)
    async def index_error(_: Request, exc: PropdexError) -> JSONResponse:
        # The index is missing or unreadable (a truncated data file, its folder removed) or
        # the embedder failed: the message names it; the service stays up and answers
        # again once the cause is gone.
        status = 422 if isinstance(exc, SearchRequestError) else 503
        body = {"error": str(exc), "detail": str(exc)}
        if isinstance(exc, IndexNotFoundError):
            # Tells `propdex search` and the retrievers a missing index from a damaged one,
            # which share the 503, so they raise what a local search raises.
            body["error_kind"] = NO_INDEX
        return JSONResponse(status_code=status, content=body)

    @app.post("/search", summary="Search the index (same results as `propdex search --json`)",
              response_model=list[dict[str, Any]])
    def search(request: SearchRequest) -> Response:  # type: ignore[valid-type]
        results = reader.search(request.query, level=request.level, mode=request.mode,
                                k=request.k, doc_ids=request.doc_ids, source=request.source,
                                where=request.where)
        # Serialised here: the rows are plain JSON types already, and FastAPI's validation
        # and encoding of a declared return value cost more than the search's JSON itself.
        return Response(json_bytes([r.to_dict() for r in results]),
                        media_type="application/json")

    @app.get("/documents", summary="Every document: status, title, summary, counts, last run")
    def documents() -> list[dict[str, Any]]:
        return reader.documents()

    @app.get("/documents/{doc_id}", summary="One document's row (without its text)")
    def document(doc_id: Annotated[str, Path(max_length=MAX_ID_CHARS, pattern=ID_PATTERN)],
                 ) -> dict[str, Any]:
        row = reader.document(doc_id)
        if row is None:
            raise HTTPException(404, f"no document {doc_id!r}")
        return row

    @app.get("/chunks/{chunk_id}",
             summary="A live chunk: text, header, pages, offsets, propositions with grades")
    def chunk(chunk_id: Annotated[str, Path(max_length=MAX_ID_CHARS, pattern=ID_PATTERN)],
              ) -> dict[str, Any]:
        row = reader.chunk(chunk_id)
        if row is None:
            raise HTTPException(404, f"no live chunk {chunk_id!r}")
        return row

    @app.get("/health", summary="Index version, row counts and embedder")
    def health() -> dict[str, Any]:
        # The process: with several workers on one port, each answers for itself.
        return {**reader.health(), "pid": os.getpid()}

    # The middleware added last runs first: CORS answers preflights (which carry no
    # token), then the token is checked, then the body size, before any body is read.
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.api_max_body_bytes)
    if settings.api_token is not None:
        app.add_middleware(BearerTokenMiddleware, token=settings.api_token.get_secret_value())
    if settings.api_cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.api_cors_origins,
                           allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    return app

