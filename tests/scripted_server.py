"""A scripted OpenAI-compatible HTTP server for tests and benchmarks.

It serves POST /v1/chat/completions, POST /v1/embeddings, POST /v1/completions (legacy text
completions with echo and prompt log-probabilities) and GET /v1/models on 127.0.0.1 at a
free port, from a background thread, each connection in its own thread. Without a script it
answers every propdex prompt validly (so the whole pipeline can run against it):

- propositions: the sentences of the <content> block;
- grading: 8 on every criterion for every "[i]" line of the <propositions> block;
- title: the first line of the <document> block; summary: its first sentence;
- embeddings: deterministic vectors from a hash of each text (not normalised);
- llm_chunk: the <document> block copied with the split marker at each paragraph start;
  sectioning: one section over every numbered line;
- /v1/completions: the prompt echoed and scored token by token (see ``prompt_scorer``).

Like real servers, it stops an answer at the request's ``max_tokens`` (or
``max_completion_tokens``; 4 characters a token) with finish_reason=length, and it can be
told to refuse request forms: ``refused_formats=("json_schema",)`` answers that
response_format type with HTTP 500 as llama-cpp-python's server does, ``refused_fields=
("max_tokens",)`` answers a request carrying that field with HTTP 400 as OpenAI's newer
models do. ``context_window=4096`` makes it a server that validates prompt + cap against its
window as vLLM does (HTTP 400 "This model's maximum context length is 4096 tokens..."), and
``model_fields`` adds fields to its /v1/models entries (vLLM's ``{"max_model_len": 4096}``,
llama.cpp's ``{"meta": {"n_ctx_train": 8192}}``); ``props`` is served at GET /props as
llama.cpp's server does.

``script(...)`` queues actions that the next requests consume, to shape an answer or inject a
fault: latency, 429 with Retry-After, 5xx, a hang past the client timeout, malformed,
truncated or empty content, a non-JSON body, 401, 404 model not found. Every POST is recorded
in ``requests`` (path, JSON body, headers, step, arrival time, and when the client hung up
while the server held it), every GET (what a client reads
of the server: /v1/models, /props) in ``reads``, and the highest number in flight is tracked.

    with ScriptedServer() as server:
        server.script(rate_limited(retry_after=1), step="grading")
        settings = Settings(llm_base_url=server.url + "/v1", ...)
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import re
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
COMPLETIONS_PATH = "/v1/completions"  # legacy text completions: echo + prompt logprobs
MODELS_PATH = "/v1/models"
PROPS_PATH = "/props"  # llama.cpp's server settings, at its root
DEFAULT_MODEL = "scripted-model"
DEFAULT_GRADE = 8

# Markers of each propdex prompt in its system message (used when no json_schema names it).
_STEP_MARKERS = (
    ('{"grades"', "grading"),
    ('{"propositions"', "propositions"),
    ('{"summary"', "summary"),
    ('{"title"', "title"),
    ('{"sections"', "sectioning"),
    ("insert the split marker", "llm_chunk"),
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_NUMBERED_LINE = re.compile(r"^\s*\[(\d+)\]", re.MULTILINE)

# A responder turns (step, request body) into answer content, or None to defer to the default.
# A prompt scorer gives extra top log-probabilities (token -> logprob) at a character offset
# of a /v1/completions prompt: a test's stand-in for a model that wants a token there.
PromptScorer = Callable[[str, int], dict[str, float]]
_PROMPT_TOKEN = re.compile(r"\s*\S+|\s+")
Responder = Callable[[str | None, dict[str, Any]], str | None]


# --------------------------------------------------------------------------- actions


@dataclass
class Action:
    """What the server does with one request. Build them with the helpers below."""

    status: int = 200
    content: str | None = None  # None: the default answer for the request
    transform: Callable[[str], str] | None = None  # applied to the (default) answer
    finish_reason: str = "stop"
    latency: float = 0.0  # seconds to wait before answering
    hang: float = 0.0  # seconds to stall, then drop the connection without answering
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # OpenAI-style error object for status >= 400
    raw_body: bytes | None = None  # sent as is instead of a JSON answer


def reply(
    content: str | None = None, *, latency_ms: float = 0, finish_reason: str = "stop"
) -> Action:
    return Action(content=content, latency=latency_ms / 1000, finish_reason=finish_reason)


def delayed(latency_ms: float) -> Action:
    return Action(latency=latency_ms / 1000)


def transformed(transform: Callable[[str], str], *, finish_reason: str = "stop") -> Action:
    return Action(transform=transform, finish_reason=finish_reason)


def fenced() -> Action:
    """The default answer wrapped in a ```json code fence with prose around it."""
    return transformed(lambda text: f"Here is the JSON:\n```json\n{text}\n```\n")


def malformed() -> Action:
    return reply('{"answer": [1, 2,, oops')


def truncated(finish_reason: str = "length") -> Action:
    """The default answer cut in half, as when a model hits its token limit."""
    return transformed(lambda text: text[: len(text) // 2], finish_reason=finish_reason)


def empty() -> Action:
    return reply("")


def garbled() -> Action:
    """HTTP 200 with a body that is not JSON, like a proxy's error page."""
    return Action(raw_body=b"<html><body>502 Bad Gateway</body></html>")


def rate_limited(retry_after: float | None = 1.0, *, retry_after_ms: float | None = None) -> Action:
    headers = {}
    if retry_after is not None:
        headers["Retry-After"] = f"{retry_after:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = f"{retry_after_ms:g}"
    return Action(
        status=429,
        headers=headers,
        error={"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"},
    )


def server_error(status: int = 500) -> Action:
    return Action(
        status=status, error={"message": "The server had an error", "type": "server_error"}
    )


def hang(seconds: float = 30.0) -> Action:
    return Action(hang=seconds)


def unauthorized() -> Action:
    return Action(
        status=401,
        error={"message": "Incorrect API key provided.", "type": "invalid_request_error",
               "code": "invalid_api_key"},
    )


def model_not_found(model: str = DEFAULT_MODEL) -> Action:
    return Action(
        status=404,
        error={"message": f"The model `{model}` does not exist or you do not have access to it.",
               "type": "invalid_request_error", "code": "model_not_found"},
    )


# --------------------------------------------------------------------------- default answers


def step_of(body: dict[str, Any]) -> str | None:
    """Which propdex step a chat request is: the json_schema name, else the prompt's marker."""
    response_format = body.get("response_format") or {}
    name = (response_format.get("json_schema") or {}).get("name")
    if name:
        return name
    system = " ".join(
        m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system"
    )
    for marker, step in _STEP_MARKERS:
        if marker in system:
            return step
    return None


def first_user_text(body: dict[str, Any]) -> str:
    # The first user message, so a repair request gets the same answer as the original.
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def block(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return match.group(1) if match else ""


def sentences(text: str) -> list[str]:
    pieces = (" ".join(piece.split()) for piece in _SENTENCE_END.split(text))
    return [piece for piece in pieces if len(piece) > 2]


def default_answer(step: str | None, body: dict[str, Any]) -> str:
    user = first_user_text(body)
    if step == "propositions":
        return json.dumps({"propositions": sentences(block(user, "content"))})
    if step == "grading":
        count = len(_NUMBERED_LINE.findall(block(user, "propositions")))
        grades = [
            {"index": i, "accuracy": DEFAULT_GRADE, "clarity": DEFAULT_GRADE,
             "completeness": DEFAULT_GRADE, "conciseness": DEFAULT_GRADE}
            for i in range(count)
        ]
        return json.dumps({"grades": grades})
    if step == "title":
        lines = [line.strip() for line in block(user, "document").splitlines() if line.strip()]
        title = " ".join(lines[0].split()[:12]) if lines else "Untitled document"
        return json.dumps({"title": title})
    if step == "summary":
        found = sentences(block(user, "document"))
        summary = found[0][:300] if found else "A short document."
        return json.dumps({"summary": summary})
    if step == "llm_chunk":  # the document copied, a split marker at each paragraph start
        return re.sub(r"\n[ \t]*\n\s*", lambda m: m.group(0) + "段", block(user, "document"))
    if step == "sectioning":  # one section over every numbered line
        numbers = [int(n) for n in _NUMBERED_LINE.findall(block(user, "document"))]
        section = {"title": "Whole text", "start_line": min(numbers, default=0),
                   "end_line": max(numbers, default=0)}
        return json.dumps({"sections": [section]})
    return "OK"


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def prompt_tokens_of(body: dict[str, Any]) -> int:
    # Messages plus the response_format schema: hosted servers bill the schema as prompt too
    # (counted without JSON's optional whitespace, which carries no content).
    text = "".join(str(m.get("content") or "") for m in body.get("messages", []))
    if body.get("response_format"):
        text += json.dumps(body["response_format"], separators=(",", ":"))
    return estimate_tokens(text)


def hashed_vector(text: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(seed).normal(0.0, 3.0, dim).astype(np.float32)


# --------------------------------------------------------------------------- the server


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any] | None
    headers: dict[str, str]  # names lower-cased
    step: str | None
    received: float  # time.monotonic() on arrival
    status: int = 0  # the status answered (0: none, e.g. a hang)
    # time.monotonic() when the client closed the connection while the server held the request
    # (a hang or latency): a client that cut it, gave up, or exited; None while it waits.
    hung_up: float | None = None


HANG_UP_POLL = 0.02  # seconds between two looks at a held request's connection


def _hung_up(connection: socket.socket) -> bool:
    """Whether the client closed ``connection`` (end of stream, or reset)."""
    poller = select.poll()  # not select(): a benchmark's process may hold descriptors past 1023
    poller.register(connection, select.POLLIN)
    try:
        return bool(poller.poll(0)) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins every connection thread: no leaks
    request_queue_size = 256  # benchmarks open dozens of connections at once
    allow_reuse_address = True

    def __init__(self, scripted: ScriptedServer, port: int = 0):
        self.scripted = scripted
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        self.connections_opened = 0  # accepted since start: what clients' pools opened
        super().__init__(("127.0.0.1", port), _Handler)

    def get_request(self):  # type: ignore[override]
        sock, address = super().get_request()
        with self.sockets_lock:
            self.open_sockets.add(sock)
            self.connections_opened += 1
        return sock, address

    def shutdown_request(self, request):  # type: ignore[override]
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:  # type: ignore[override]
        # A connection cut by drop_connections() or by a client giving up is how a stopped or
        # disappearing server behaves, not a server bug: socketserver would print its
        # traceback to sys.stderr, which tests capture as the CLI's own output.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def drop_connections(self) -> None:
        """Wake every connection thread idling on a keep-alive socket so it can exit."""
        with self.sockets_lock:
            sockets = list(self.open_sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the openai client expects
    # Headers and body go out in two writes; with Nagle's algorithm on, the body waits for
    # the client's delayed ACK (~40 ms per request).
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        scripted = self.server.scripted
        scripted._record("GET", self.path, None, self._headers(), None, into=scripted._reads)
        if self.path.rstrip("/") == MODELS_PATH:
            models = [{"id": m, "object": "model", "owned_by": "scripted", **scripted.model_fields}
                      for m in scripted.models]
            self._send_json(200, {"object": "list", "data": models})
        elif self.path.rstrip("/") == PROPS_PATH and scripted.props is not None:
            self._send_json(200, scripted.props)
        else:
            self._send_error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:
        scripted = self.server.scripted
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            body = None
        path = self.path.rstrip("/")
        step = {EMBEDDINGS_PATH: "embeddings", COMPLETIONS_PATH: "completions"}.get(
            path, step_of(body) if body else None)
        record = scripted._record("POST", path, body, self._headers(), step)
        if body is None:
            record.status = 400
            self._send_error(400, "body is not JSON", "invalid_request_error")
            return
        if path not in (CHAT_PATH, EMBEDDINGS_PATH, COMPLETIONS_PATH):
            record.status = 404
            self._send_error(404, f"no route {path}", "not_found")
            return
        refusal = (scripted._refusal(body) or scripted._overflow(body)) if path == CHAT_PATH else None
        if refusal is not None:
            record.status, message = refusal
            self._send_error(record.status, message, "invalid_request_error")
            return
        action = scripted._next_action(step)
        with scripted._in_flight():
            if action.hang:
                scripted._hold(record, action.hang, self.connection)
                self.close_connection = True  # the client gave up long ago; just hang up
                return
            wait = action.latency + scripted.latency_ms / 1000
            if wait and scripted._hold(record, wait, self.connection):
                self.close_connection = True
                return
            if action.status >= 400:
                record.status = action.status
                error = action.error or {"message": f"HTTP {action.status}", "type": "error"}
                self._send_json(action.status, {"error": error}, action.headers)
                return
            if action.raw_body is not None:
                record.status = 200
                self._send_raw(200, action.raw_body, action.headers)
                return
            if path == EMBEDDINGS_PATH:
                payload = scripted._embeddings(body)
            elif path == COMPLETIONS_PATH:
                payload = scripted._text_completion(body, action)
            else:
                payload = scripted._completion(step, body, action)
            record.status = 200
            self._send_json(200, payload, action.headers)

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _send_error(self, status: int, message: str, kind: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind}})

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode("utf-8"), headers)

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client timed out and closed the socket
            self.close_connection = True


class ScriptedServer:
    def __init__(
        self,
        *,
        latency_ms: float = 0,
        embed_dim: int = 384,
        models: tuple[str, ...] = (DEFAULT_MODEL,),
        responder: Responder | None = None,
        prompt_scorer: PromptScorer | None = None,
        refused_formats: tuple[str, ...] = (),
        refused_fields: tuple[str, ...] = (),
        context_window: int | None = None,
        model_fields: dict[str, Any] | None = None,
        props: dict[str, Any] | None = None,
        port: int = 0,  # 0 = a free port; a given one lets a test put a new server at an old URL
    ):
        self.latency_ms = latency_ms  # added to every POST
        self.embed_dim = embed_dim
        self.models = models
        self.responder = responder
        self.prompt_scorer = prompt_scorer
        self.refused_formats = refused_formats  # response_format types answered with HTTP 500
        self.refused_fields = refused_fields  # request fields answered with HTTP 400
        self.context_window = context_window  # prompt + cap over it answered with HTTP 400
        self.model_fields = model_fields or {}  # added to every /v1/models entry
        self.props = props  # the GET /props answer; None: no such route
        self.port = port
        self._lock = threading.Lock()
        self._queues: dict[str | None, deque[Action]] = {}
        self._requests: list[RecordedRequest] = []
        self._reads: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._active = 0
        self.max_in_flight = 0
        self._stopping = threading.Event()
        self._holds = threading.Condition()  # notified by stop() and release()
        self._released_at = -math.inf  # requests received until then: their holds ended
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ------------------------------------------------------------------------
    def start(self) -> ScriptedServer:
        self._stopping.clear()
        self._httpd = _HTTPServer(self, self.port)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
            name="scripted-openai-server",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        with self._holds:
            self._stopping.set()  # ends hangs and latencies at once
            self._holds.notify_all()
        self._httpd.shutdown()
        self._httpd.drop_connections()
        self._httpd.server_close()  # joins the connection threads
        assert self._thread is not None
        self._thread.join()
        self._httpd = None
        self._thread = None

    def release(self) -> None:
        """End the hangs and latencies of the requests received so far as ``stop`` does (the
        connection closed unanswered), and go on serving: later requests get their actions."""
        with self._holds:
            self._released_at = time.monotonic()
            self._holds.notify_all()

    def _hold(self, record: RecordedRequest, seconds: float, connection: socket.socket) -> bool:
        """Wait ``seconds`` before answering ``record``; True when stop() or release() ended
        the wait first. Meanwhile ``connection`` is watched: the moment its client hangs up
        is ``record.hung_up`` (the hold goes on, as a server busy with the answer would)."""
        end = time.monotonic() + seconds
        with self._holds:
            while not (self._stopping.is_set() or record.received <= self._released_at):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                if record.hung_up is None and _hung_up(connection):
                    record.hung_up = time.monotonic()
                self._holds.wait(left if record.hung_up is not None else min(left, HANG_UP_POLL))
            return True

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # scripting and records ------------------------------------------------------------
    def script(self, *actions: Action, step: str | None = None) -> None:
        """Queue actions for the next requests of ``step`` (None: of any step).

        A request takes from its step's queue first, then from the shared one; with both
        empty it gets the default answer."""
        with self._lock:
            self._queues.setdefault(step, deque()).extend(actions)

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(len(queue) for queue in self._queues.values())

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def connections_opened(self) -> int:
        """TCP connections accepted since the server (re)started."""
        assert self._httpd is not None, "the server is not running"
        with self._httpd.sockets_lock:
            return self._httpd.connections_opened

    @property
    def reads(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._reads)

    def calls(self, step: str | None = None, path: str = CHAT_PATH) -> int:
        """POSTs received on ``path``, all of them or those of one step."""
        return sum(
            1 for r in self.requests
            if r.method == "POST" and r.path == path and (step is None or r.step == step)
        )

    def reset(self) -> None:
        with self._lock:
            self._queues.clear()
            self._requests.clear()
            self._reads.clear()
            self.max_in_flight = 0

    def _record(
        self, method: str, path: str, body: Any, headers: dict[str, str], step: str | None,
        into: list[RecordedRequest] | None = None,
    ) -> RecordedRequest:
        record = RecordedRequest(method, path, body, headers, step, time.monotonic())
        with self._lock:
            (self._requests if into is None else into).append(record)
        return record

    def _next_action(self, step: str | None) -> Action:
        with self._lock:
            for key in (step, None):
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
        return Action()

    def _in_flight(self) -> _InFlight:
        return _InFlight(self)

    def _refusal(self, body: dict[str, Any]) -> tuple[int, str] | None:
        """The status and message of a refused request form, as real servers word them."""
        kind = (body.get("response_format") or {}).get("type")
        if kind in self.refused_formats:
            # llama-cpp-python 0.3's request model fails validation and the app answers 500.
            return 500, ("1 validation error: {'type': 'literal_error', 'loc': ('body', "
                         f"'response_format', 'type'), 'msg': \"Input should be 'text'\", 'input': '{kind}'}}")
        for name in self.refused_fields:
            if name in body:
                other = "max_completion_tokens" if name == "max_tokens" else "max_tokens"
                return 400, (f"Unsupported parameter: '{name}' is not supported with this model. "
                             f"Use '{other}' instead.")
        return None

    def _overflow(self, body: dict[str, Any]) -> tuple[int, str] | None:
        """vLLM's refusal of a request whose prompt and cap exceed the window (no cap: the
        rest of the window is the cap, so only a prompt filling it is refused)."""
        if self.context_window is None:
            return None
        prompt = prompt_tokens_of(body)
        cap = body.get("max_completion_tokens", body.get("max_tokens")) or 0
        if prompt + cap <= self.context_window and prompt < self.context_window:
            return None
        return 400, (f"This model's maximum context length is {self.context_window} tokens. "
                     f"However, you requested {prompt + cap} tokens ({prompt} in the messages, "
                     f"{cap} in the completion). Please reduce the length of the messages or "
                     "completion.")

    # answers --------------------------------------------------------------------------
    def _completion(self, step: str | None, body: dict[str, Any], action: Action) -> dict[str, Any]:
        content = action.content
        if content is None:
            custom = self.responder(step, body) if self.responder else None
            content = custom if custom is not None else default_answer(step, body)
        if action.transform is not None:
            content = action.transform(content)
        finish_reason = action.finish_reason
        cap = body.get("max_completion_tokens", body.get("max_tokens"))
        if cap is not None and estimate_tokens(content) > cap:
            content, finish_reason = content[: cap * 4], "length"
        prompt_tokens = prompt_tokens_of(body)
        completion_tokens = estimate_tokens(content)
        return {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", DEFAULT_MODEL),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": None,
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _text_completion(self, body: dict[str, Any], action: Action) -> dict[str, Any]:
        """A legacy completion: ``action.content`` (default "") as the generated text; with
        ``echo`` the prompt is returned too and, with ``logprobs``, scored token by token
        (whitespace joins the word after it; every token -0.01, plus the prompt scorer's)."""
        prompt = body.get("prompt") or ""
        prompt = prompt if isinstance(prompt, str) else "".join(map(str, prompt))
        generated = action.content or ""
        echo = bool(body.get("echo"))
        logprobs = None
        if body.get("logprobs") is not None:
            pieces = [(m.group(0), m.start()) for m in _PROMPT_TOKEN.finditer(prompt)] if echo else []
            if generated:
                pieces.append((generated, len(prompt) if echo else 0))
            top = []
            for token, offset in pieces:
                alternatives = {token: -0.01}
                if self.prompt_scorer and offset < len(prompt):
                    alternatives.update(self.prompt_scorer(prompt, offset))
                top.append(alternatives)
            logprobs = {"tokens": [t for t, _ in pieces], "token_logprobs": [-0.01] * len(pieces),
                        "top_logprobs": top, "text_offset": [o for _, o in pieces]}
        choice = {"index": 0, "text": (prompt if echo else "") + generated, "logprobs": logprobs,
                  "finish_reason": "length"}
        tokens = (estimate_tokens(prompt), estimate_tokens(generated))
        usage = dict(zip(("prompt_tokens", "completion_tokens"), tokens, strict=True), total_tokens=sum(tokens))
        return {"id": f"cmpl-scripted-{next(self._ids)}", "object": "text_completion",
                "created": int(time.time()), "model": body.get("model", DEFAULT_MODEL),
                "choices": [choice], "usage": usage}

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else list(texts)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = hashed_vector(str(text), self.embed_dim)
            encoded: Any = (
                base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                if as_base64 else vector.tolist()
            )
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(estimate_tokens(str(text)) for text in texts)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", DEFAULT_MODEL),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


class _InFlight:
    """Counts a request as in flight for the duration of a with-block."""

    def __init__(self, server: ScriptedServer):
        self.server = server

    def __enter__(self) -> None:
        with self.server._lock:
            self.server._active += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server._active)

    def __exit__(self, *exc: object) -> None:
        with self.server._lock:
            self.server._active -= 1
