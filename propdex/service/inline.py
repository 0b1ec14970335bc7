"""POST /search answered in the event loop's thread, when the reader searches its resident index.

Why: a resident search is 3-4 ms of Python and NumPy, one at a time per process (it holds
the GIL and the reader runs one search at a time), so FastAPI's route machinery --
dependency resolution, validation through its own layers, a hand-off to its thread pool and
back -- was an eighth of a request's CPU: 4.6-4.7 against 4.1 ms per request, 208-214 against 243
searches/s from 32 clients at 100k propositions (bench/RESULTS.md, issue 13). The same
pydantic model validates the body and the same 422 body names the field; FastAPI still
describes the route in the OpenAPI docs and answers it for the LanceDB engine, whose queries
block on I/O and belong on threads.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from propdex.api import IndexReader
from propdex.service.errors import validation_body
from propdex.service.limits import send_json


class InlineSearchMiddleware:
    """Answers POST /search with ``reader`` (resident) itself; passes every other request
    on. Sits inside the token and body-size middleware, so both apply first."""

    def __init__(self, app: Any, reader: IndexReader, model: type[BaseModel]):
        self.app = app
        self.reader = reader
        self.model = model

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if not (scope["type"] == "http" and scope["method"] == "POST"
                and scope["path"] == "/search" and self._json(scope)):
            return await self.app(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        # Parsed and validated as FastAPI does (fastapi.routing): the same errors, with
        # locations under "body", give the same 422.
        try:
            payload = json.loads(body) if body else None
        except json.JSONDecodeError as exc:
            return await send_json(send, 422, validation_body([{
                "type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                "input": {}, "ctx": {"error": exc.msg}}]))
        if payload is None:
            return await send_json(send, 422, validation_body([{
                "type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]))
        try:
            request = self.model.model_validate(payload)
        except ValidationError as exc:
            return await send_json(send, 422, validation_body(
                [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]))
        if request.mode != "fts" and not self.reader.has_query_vector(request.query):
            # A new query's embedding takes milliseconds outside the GIL (ONNX Runtime): on
            # a thread, so that the loop answers other requests meanwhile.
            await anyio.to_thread.run_sync(self.reader.query_vector, request.query)
        results = self.reader.search(request.query, level=request.level, mode=request.mode,
                                     k=request.k, doc_ids=request.doc_ids,
                                     source=request.source)
        await send_json(send, 200, [r.to_dict() for r in results])

    @staticmethod
    def _json(scope: dict) -> bool:
        """A JSON body, as FastAPI tells one (application/json or application/*+json); any
        other goes to FastAPI, which answers it as before."""
        content_type = dict(scope["headers"]).get(b"content-type", b"")
        kind = content_type.split(b";")[0].strip().lower()
        return kind == b"application/json" or (kind.startswith(b"application/")
                                                and kind.endswith(b"+json"))

