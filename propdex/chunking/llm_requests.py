"""The two plain-text LLM requests of the llm chunker, with propdex's retry policy.

``LLMClient`` answers JSON; LlamaChunk needs the raw text of a copy (chat completions) and
the prompt log-probabilities of a legacy completion (``/v1/completions`` with ``echo`` and
``logprobs``, served by vLLM and OpenAI's legacy models; llama.cpp's server does not echo
prompt log-probabilities). Both go through the same retry policy, concurrency and rate
limits as every other call to the server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from propdex.deadlines import current_deadline
from propdex.llm.client import (
    OPENAI_BASE_URL,
    api_key_value,
    call_with_retries,
    negotiation_of,
    read_response,
    usage_of,
)
from propdex.llm.context_window import request_cap, send_within_window
from propdex.llm.limits import limiter_for
from propdex.llm.openai_clients import SharedClientUser
from propdex.llm.output_caps import copy_cap, output_cap
from propdex.models import Usage
from propdex.settings import Settings

# Alternatives returned per prompt position (OpenAI's legacy API allows at most 5).
TOP_LOGPROBS = 5


@dataclass
class CopyAnswer:
    text: str
    cut_off: bool  # finish_reason == "length": the copy stops early
    usage: Usage


@dataclass
class PromptScores:
    offsets: list[int]  # character offset of each prompt token in the prompt
    top: list[dict[str, float]]  # the alternatives at each position (empty when none)
    usage: Usage


class ChunkingRequests(SharedClientUser):
    def __init__(self, settings: Settings):
        self.settings = settings
        self.model = settings.model_for("context")
        self.base_url = (settings.llm_base_url or OPENAI_BASE_URL).rstrip("/")
        self._secret = api_key_value(settings.llm_api_key)
        self._limiter = limiter_for(self.base_url, settings.llm_concurrency, settings.llm_rpm)

    def _send(self, what: str, call: Callable[[float], Any]) -> Any:
        """``call(timeout)`` with the retry policy, under the document's deadline if one is set."""
        deadline = current_deadline()

        def send() -> Any:
            with self._limiter.slot():
                timeout = self.settings.llm_timeout
                if deadline is not None:  # no attempt starts after it; none outlives it
                    deadline.check(what)
                    timeout = min(timeout, deadline.remaining())
                return read_response(lambda: call(timeout))

        return call_with_retries(
            send, what=what, model=self.model, base_url=self.base_url, secret=self._secret,
            max_attempts=self.settings.llm_max_attempts,
            backoff_max=self.settings.llm_backoff_max, timeout=self.settings.llm_timeout,
            unreachable_cooldown=self.settings.llm_unreachable_cooldown_s,
        )

    def copy(self, messages: list[dict[str, str]], chars: int) -> CopyAnswer:
        """The model's copy of a window of ``chars`` characters, capped at what a copy needs."""
        cap = output_cap("llm_chunk", self.settings, copy_cap(chars))

        def send(window: int | None) -> Any:
            extra: dict[str, Any] = {}
            sent_cap = request_cap(cap, messages, None, window, step="llm_chunk")
            if sent_cap is not None:  # the field the JSON requests settled on for this server and model
                extra[negotiation_of(self.settings, self.base_url, self.model).cap_field] = sent_cap
            return self._send("llm_chunk request", lambda timeout: self._client.chat.completions.create(
                model=self.model, messages=messages, temperature=self.settings.llm_temperature,
                timeout=timeout, **extra,
            ))

        completion = send_within_window(send, self.settings.llm_context_window, self.base_url,
                                        self.model, self._secret, self.settings.llm_timeout)
        choice = (completion.choices or [None])[0]
        text = (choice.message.content or "") if choice else ""
        cut_off = choice is None or choice.finish_reason == "length"
        return CopyAnswer(text, cut_off, usage_of(completion))

    def prompt_logprobs(self, prompt: str) -> PromptScores:
        # One generated token at most: only the echoed prompt's scores are read.
        completion = self._send(
            "llm_chunk_logprobs request",
            lambda timeout: self._client.completions.create(
                model=self.model, prompt=prompt, echo=True, logprobs=TOP_LOGPROBS,
                max_tokens=1, temperature=0, timeout=timeout,
            ),
        )
        choice = (completion.choices or [None])[0]
        logprobs = getattr(choice, "logprobs", None) if choice else None
        offsets = list(getattr(logprobs, "text_offset", None) or [])
        top = [dict(item or {}) for item in (getattr(logprobs, "top_logprobs", None) or [])]
        return PromptScores(offsets, top, usage_of(completion))
