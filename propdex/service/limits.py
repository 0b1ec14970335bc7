"""ASGI middleware of the service: the bearer token and the request body size limit.

Both are plain ASGI so they cover every route, the OpenAPI docs included, and act before a
body is parsed.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from starlette.exceptions import HTTPException

Scope = dict[str, Any]


def json_bytes(content: Any) -> bytes:
    """``content`` as compact UTF-8 JSON."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()


async def send_json(send: Any, status: int, content: Any,
                    headers: list[tuple[bytes, bytes]] = ()) -> None:
    """A whole JSON response through the ASGI ``send``."""
    body = json_bytes(content)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *headers]})
    await send({"type": "http.response.body", "body": body})


async def _reply(send: Any, status: int, message: str,
                 headers: list[tuple[bytes, bytes]] = ()) -> None:
    await send_json(send, status, {"error": message, "detail": message}, headers)


class BearerTokenMiddleware:
    """401 unless the request carries ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"authorization", b"")
        # Constant time: the comparison must not tell how much of a guess was right.
        if not hmac.compare_digest(given, self.expected):
            return await _reply(send, 401, "missing or wrong bearer token",
                                [(b"www-authenticate", b"Bearer")])
        return await self.app(scope, receive, send)


class BodyTooLarge(HTTPException):
    """Raised while the route reads a streamed body; FastAPI turns it into the 413."""

    def __init__(self, max_bytes: int):
        super().__init__(413, f"request body over {max_bytes} bytes")


class BodySizeLimitMiddleware:
    """413 when a request body is larger than ``max_bytes`` (declared or streamed)."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            return await _reply(send, 413, f"request body over {self.max_bytes} bytes")
        received = 0
        started = False

        async def counted_receive() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:  # a chunked body without a length
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracked_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge:
            if not started:
                await _reply(send, 413, f"request body over {self.max_bytes} bytes")
