"""The model's context window: what a request's prompt leaves of it bounds the request's cap.

A server holds prompt and answer in one window. llama.cpp shortens a cap that does not fit
without a word, but vLLM (and TGI, and llama.cpp itself once the prompt alone is too long)
refuses the request with HTTP 400: a propositions cap (5,203 tokens; up to 12,425 for a
table chunk) plus its prompt exceeds a 4,096-token window. So when the window is known
(``llm_context_window``, else what the server says of itself, read once per process and
server) every cap is cut to the window less the prompt, estimated high (``text_tokens``, plus
each message's chat-template tokens), and the title and summary prefixes to what fits. A
prompt leaving less than a useful answer fails its request before it is sent, with a
``LLMContextWindowError`` naming the sizes and the fix; so does a server's own
context-length refusal, with one exception (``send_within_window``): a long-lived process
(``propdex watch``, the service, a Prefect worker) outlives the server it read, and a server
restarted with a smaller window refuses every request sized to the old one. So a refusal
of a request sized to what the server said (or to nothing it said) reads the server again,
and a smaller window read then is the one the request is sized to and sent once more.
Otherwise the refusal is not retried: the same request fails the same way.

Not part of any cache key: the cap bounds how long an answer may be, not what it says, so
an answer cached under another window (or none) is reused. Only a title or summary prefix
the window shortens is new text, with its own key; with the window unknown nothing changes.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from propdex.errors import LLMContextLengthRefusedError, LLMContextWindowError
from propdex.llm.live_sockets import trace_connections
from propdex.llm.output_caps import CHARS_PER_TOKEN_FLOOR
from propdex.stopping import cut_off_error, run_is_stopping

log = logging.getLogger("propdex.llm")

T = TypeVar("T")

# Chat-template tokens around each message (role markers, turn delimiters: 4-6 in the
# Gemma, Llama 3 and ChatML templates), rounded up.
MESSAGE_TOKENS = 8
# The beginning-of-sequence token and the assistant turn the template opens for the answer.
MARGIN_TOKENS = 16
# The least room an answer is sent with: one proposition of the default longest
# (max_proposition_chars=600: 232 tokens at the output caps' floor) in its JSON. Less cannot
# hold one useful item of any step (a title or a summary sentence is shorter, and gets its
# whole cap when that is smaller).
MIN_ANSWER_TOKENS = 256
# What to change when a step's prompt leaves too little room.
FIXES = {
    "propositions": "a smaller chunk_size or a lower max_table_propositions",
    "grading": "a smaller chunk_size or a lower max_table_propositions",
    "title": "a lower title_prefix_tokens",
    "summary": "a lower summary_prefix_tokens",
    "llm_chunk": "a smaller llm_chunk_window",
}
# Statuses and wordings of a request refused for its length: vLLM and OpenAI ("This model's
# maximum context length is 4096 tokens..."), llama.cpp ("the request exceeds the available
# context size"), TGI (422 "`inputs` tokens + `max_new_tokens` must be <= 4096").
OVERFLOW_STATUSES = frozenset({400, 413, 422})
_OVERFLOW = re.compile(r"maximum context length|context[ _](length|size|window)|max_new_tokens` must be",
                       re.IGNORECASE)
# A word of ASCII letters, a run of whitespace, or any other single character.
_PIECE = re.compile(r"[A-Za-z]+|\s+|.", re.DOTALL)
# How long the one reading of a server's window may take; a server that does not answer
# in time is taken as one that does not say.
DISCOVERY_TIMEOUT_SECONDS = 10.0


def is_context_overflow(status: int, message: str) -> bool:
    """Whether a refused request was refused because prompt and cap exceed the window."""
    return status in OVERFLOW_STATUSES and _OVERFLOW.search(message) is not None


def fix_for(step: str) -> str:
    return f"a model or server with a larger context window, or {FIXES.get(step, 'a shorter input')}"


def _token_pieces(text: str) -> Iterator[tuple[int, int]]:
    """(start, estimated tokens) of each piece of ``text``: a word of ASCII letters at the
    output caps' floor of 3 characters a token but at least one (with the space before it,
    which tokenisers join to it), a space not before a word, every digit, punctuation mark and
    character beyond ASCII a token of its own."""
    for match in _PIECE.finditer(text):
        piece = match.group()
        if piece[0].isspace():
            end = match.end()
            followed_by_word = end < len(text) and text[end].isascii() and text[end].isalpha()
            yield match.start(), 0 if followed_by_word else 1
        elif piece[0].isascii() and piece[0].isalpha():
            yield match.start(), math.ceil(len(piece) / CHARS_PER_TOKEN_FLOOR)
        else:
            yield match.start(), 1


def text_tokens(text: str) -> int:
    """Tokens of ``text``, estimated high. Tables run far denser than prose: tokenisers split
    numbers digit by digit (Gemma, Qwen) or in threes (Llama 3), a space before a digit or a
    pipe is a token, so is each short word (EN, DE): attention's Table 2 is 795 characters and
    450 Gemma tokens, where 3 characters a token would say 265. Measured with Gemma 3's
    tokenizer, see bench/RESULTS.md (2026-11-27, context window)."""
    return sum(tokens for _, tokens in _token_pieces(text))


def estimated_prompt_tokens(messages: list[dict[str, str]], response_format: dict[str, Any] | None) -> int:
    """The request's prompt in tokens, estimated high. The response format counts too: hosted
    servers put the schema into the prompt."""
    text = "".join(message.get("content") or "" for message in messages)
    if response_format is not None:
        text += json.dumps(response_format, separators=(",", ":"))
    return text_tokens(text) + MESSAGE_TOKENS * len(messages)


def cap_within_window(cap: int | None, prompt_tokens: int, window: int, *, step: str) -> int | None:
    """``cap`` cut to the room ``prompt_tokens`` leave of ``window`` (None stays None: no cap
    is sent); ``LLMContextWindowError`` when that room is under what a useful answer needs."""
    room = window - prompt_tokens - MARGIN_TOKENS
    least = MIN_ANSWER_TOKENS if cap is None else min(cap, MIN_ANSWER_TOKENS)
    if room < least:
        raise LLMContextWindowError(
            f"{step} request: its prompt takes about {prompt_tokens} tokens of the model's "
            f"{window}-token context window, leaving {max(room, 0)} for the answer, fewer than "
            f"the {least} it needs; use {fix_for(step)}"
        )
    return None if cap is None else min(cap, room)


def request_cap(cap: int | None, messages: list[dict[str, str]], response_format: dict[str, Any] | None,
                window: int | None, *, step: str) -> int | None:
    """The cap to send with a request of ``messages``: ``cap``, cut to fit ``window`` when it
    is known (see ``cap_within_window``)."""
    if window is None:
        return cap
    return cap_within_window(cap, estimated_prompt_tokens(messages, response_format), window, step=step)


def prefix_chars_within_window(text: str, window: int, fixed_prompt_tokens: int, cap: int | None) -> int:
    """How many characters of ``text``'s start (estimated as ``text_tokens`` does) a prompt
    of ``fixed_prompt_tokens`` without it can carry and still leave ``cap`` of ``window``
    (the least useful answer when no cap is sent)."""
    answer = MIN_ANSWER_TOKENS if cap is None else cap
    budget = window - MARGIN_TOKENS - fixed_prompt_tokens - answer
    spent = 0
    for start, tokens in _token_pieces(text):
        spent += tokens
        if spent > budget:
            return start
    return len(text)


def overflow_error(what: str, step: str, message: str) -> LLMContextLengthRefusedError:
    return LLMContextLengthRefusedError(f"{what} refused for its length by the server: {message} "
                                        f"(use {fix_for(step)}, or set llm_context_window)")


# --------------------------------------------------------------------------- learning it


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _get_json(url: str, api_key: str, timeout: float) -> Any:
    """The JSON at ``url``, None when it cannot be read. A read the run's stop cuts
    (propdex.llm.live_sockets) raises RunStoppedError: it says nothing of the server, so
    nothing is kept of it."""
    try:
        with httpx.Client(event_hooks={"request": [trace_connections]}, timeout=timeout) as client:
            response = client.get(url, headers={"Authorization": f"Bearer {api_key}"})
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as error:
        if run_is_stopping():
            raise cut_off_error(f"reading {url}") from None
        log.debug("no context window from %s: %s", url, type(error).__name__)
        return None


def _running_n_ctx(base_url: str, api_key: str, timeout: float) -> int | None:
    """llama.cpp's window as started (``--ctx-size``; ``n_ctx_train`` of /v1/models is what the
    model was trained with, often far more): /props at the server's root."""
    root = base_url.removesuffix("/v1")
    props = _get_json(f"{root}/props", api_key, timeout)
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    nested = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _positive(props.get("n_ctx")) or _positive(nested)


def read_context_windows(base_url: str, api_key: str, timeout: float) -> dict[str, int]:
    """The context window of every model the server lists and describes: vLLM's
    ``max_model_len``, ``context_length`` (OpenRouter and others), llama.cpp's running n_ctx
    (else ``meta.n_ctx_train``). Empty when the server says nothing or cannot be read."""
    listing = _get_json(f"{base_url}/models", api_key, timeout)
    entries = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(entries, list):
        return {}
    entries = [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]
    llama_cpp = any(isinstance(e.get("meta"), dict) for e in entries)
    running = _running_n_ctx(base_url, api_key, timeout) if llama_cpp else None
    windows: dict[str, int] = {}
    for entry in entries:
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        window = (_positive(entry.get("max_model_len")) or _positive(entry.get("context_length"))
                  or (running if meta else None) or _positive(meta.get("n_ctx_train")))
        if window is not None:
            windows[entry["id"]] = window
    return windows


@dataclass(frozen=True, eq=False)  # compared by identity: each reading is its own object
class ServerReading:
    """What a server said of its models' windows at one reading."""

    windows: dict[str, int]

    def window(self, model: str) -> int | None:
        if model not in self.windows and len(self.windows) == 1:
            # llama.cpp answers under any model name the one model it lists (by its file path).
            return next(iter(self.windows.values()))
        return self.windows.get(model)


_read: dict[str, ServerReading] = {}
_read_lock = threading.Lock()


def _read_into_cache(key: str, api_key: str, timeout: float) -> ServerReading:
    """A new reading of the server at ``key``, kept for the process (call under _read_lock)."""
    reading = ServerReading(read_context_windows(key, api_key, min(timeout, DISCOVERY_TIMEOUT_SECONDS)))
    if reading.windows:
        log.info("the LLM server states context windows %s", reading.windows)
    _read[key] = reading
    return reading


def server_reading(base_url: str, api_key: str, timeout: float) -> ServerReading:
    """What the server says of its windows, read once per process and server (the other
    threads wait for the one reading)."""
    key = base_url.rstrip("/")
    with _read_lock:
        return _read.get(key) or _read_into_cache(key, api_key, timeout)


def reading_after(stale: ServerReading, base_url: str, api_key: str, timeout: float) -> ServerReading:
    """The server read again in place of ``stale``; when another thread has done so already,
    its reading (the requests a restarted server refuses at once make one reading)."""
    key = base_url.rstrip("/")
    with _read_lock:
        current = _read.get(key)
        if current is not None and current is not stale:
            return current
        return _read_into_cache(key, api_key, timeout)


def server_context_window(base_url: str, model: str, api_key: str, timeout: float) -> int | None:
    """The window the server states for ``model`` (see ``server_reading``); None when it
    states none."""
    return server_reading(base_url, api_key, timeout).window(model)


def forget_context_windows() -> None:
    """Forget what servers said of their windows (the next request reads it again)."""
    with _read_lock:
        _read.clear()


def context_window(setting: int | None, base_url: str, model: str, api_key: str,
                   timeout: float) -> int | None:
    """The window requests to ``model`` must fit: the setting (0: none), else the server's."""
    if setting is not None:
        return setting or None
    return server_context_window(base_url, model, api_key, timeout)


def send_within_window(send: Callable[[int | None], T], setting: int | None, base_url: str,
                       model: str, api_key: str, timeout: float) -> T:
    """``send(window)``: a request sized to ``context_window``'s window (None: unknown).

    When that window is the server's word (or its silence) and the server refuses the request
    for its length, the server may have been restarted with a smaller window (or another
    model) since it was read: it is read again, and a window smaller than the one the request
    was sized to (or one where it stated none) is the one it is sized to and sent once more.
    Otherwise the refusal stands: a setting is the user's word, and the same window would
    size the same request."""
    if setting is not None:
        return send(setting or None)
    reading = server_reading(base_url, api_key, timeout)
    window = reading.window(model)
    try:
        return send(window)
    except LLMContextLengthRefusedError:
        fresh = reading_after(reading, base_url, api_key, timeout).window(model)
        if fresh is None or (window is not None and fresh >= window):
            raise
    log.warning("the LLM server refused a request for its length (sized to %s) and now states "
                "a %d-token context window for %s: sending it again sized to that",
                f"a {window}-token context window" if window else "no known window", fresh, model)
    return send(fresh)
