"""The one wrapper over the ``openai`` package: JSON answers, validation, repair and retries.

One retry layer: the openai client's own retries are off (``max_retries=0``) and tenacity
retries transient failures (429 honouring Retry-After, 5xx, 408/409, timeouts, connection
errors) with capped exponential backoff and full jitter. Errors that no retry can fix (400,
401, 403, 404, 422) raise ``LLMConfigurationError`` at once so the run stops on the first
one. A server no connection could be made to through a request's retries is marked
unreachable (propdex.llm.unreachable): the requests after it fail at once. Invalid answers
get exactly one repair round; after that ``LLMOutputError``. Scores are never made up.

Secrets: the API key goes to the openai client and is otherwise kept only to scrub it from
every message this module builds (with anything else shaped like an OpenAI key); openai's
exceptions are not chained (``from None``) so a server echoing the key cannot leak it
through a traceback either.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import openai
from pydantic import BaseModel, SecretStr, ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from propdex.deadlines import current_deadline
from propdex.errors import (
    LLMAnswerCutOffError,
    LLMCheckError,
    LLMConfigurationError,
    LLMError,
    LLMOutputError,
    LLMServerUnreachableError,
)
from propdex.llm import unreachable
from propdex.llm.context_window import (
    context_window,
    is_context_overflow,
    overflow_error,
    request_cap,
    send_within_window,
)
from propdex.llm.limits import RequestLimiter, limiter_for
from propdex.llm.openai_clients import SharedClientUser
from propdex.llm.output_caps import derived_json_cap, output_cap
from propdex.llm.schemas import CHECK_FAILED
from propdex.llm.structured import (
    DESCRIBED_MODES,
    JSON_SCHEMA_BOUNDED,
    PROMPTED,
    Negotiation,
    Refused,
    default_cap_field,
    is_refusal,
    negotiation_for,
    response_format,
    schema_description,
    with_format,
)
from propdex.models import Usage
from propdex.settings import Settings
from propdex.stopping import check_not_stopped, cut_off_error, run_is_stopping

log = logging.getLogger("propdex.llm")

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Sent when no key is configured: local servers (vLLM, Ollama, llama.cpp) ignore it, and the
# openai client refuses to start without one.
NO_KEY = "no-key"
# Statuses where the request itself is wrong: retrying cannot help.
CONFIGURATION_STATUSES = {400, 401, 403, 404, 422}
TRANSIENT_STATUSES = {408, 409, 429}
# The first backoff is about this long (full jitter: a random wait up to it), then doubles.
BACKOFF_BASE_SECONDS = 0.5
# How much of an invalid answer is sent back in the repair request.
REPAIR_ECHO_CHARS = 2000


class UnreadableResponse(Exception):
    """The server answered 200 with a body that is not JSON (e.g. a proxy's HTML page)."""


class InvalidAnswer(Exception):
    """An answer that cannot be used; ``reason`` is short enough for a status column."""

    def __init__(self, reason: str, content: str, *, cut_off: bool = False,
                 check: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.content = content
        self.cut_off = cut_off  # stopped at the output cap
        self.check = check  # well-formed, but rejected by the deterministic checks: why


# --------------------------------------------------------------------------- secrets, URLs


def api_key_value(key: SecretStr | None) -> str:
    """The key to hand to the openai client: the setting, else OPENAI_API_KEY, else a dummy."""
    if key is not None:
        return key.get_secret_value()
    return os.environ.get("OPENAI_API_KEY") or NO_KEY


def display_url(url: str) -> str:
    """``url`` without user:password, for messages."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit(parts._replace(netloc=netloc))
    return url


_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-*]{6,}")


def scrub(text: str, secret: str) -> str:
    """``text`` with the secret and anything shaped like an API key masked."""
    if secret and secret != NO_KEY:
        text = text.replace(secret, "***")
    return _KEY_LIKE.sub(lambda m: f"{m.group(1)}-***", text)


# --------------------------------------------------------------------------- retries


def retry_after_seconds(error: BaseException | None) -> float | None:
    """The server's requested wait from Retry-After / retry-after-ms headers, if any."""
    response = getattr(error, "response", None)
    if response is None:
        return None
    headers = response.headers
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # the HTTP-date form
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def is_transient(error: BaseException) -> bool:
    if isinstance(error, (openai.APIConnectionError, UnreadableResponse)):  # incl. timeouts
        return True
    if isinstance(error, openai.APIStatusError):
        return error.status_code in TRANSIENT_STATUSES or error.status_code >= 500
    return False


def retry_wait(backoff_max: float) -> Callable[[RetryCallState], float]:
    """Retry-After when the server sent one, else capped exponential backoff with jitter."""
    backoff = wait_random_exponential(multiplier=BACKOFF_BASE_SECONDS, max=backoff_max)

    def wait(state: RetryCallState) -> float:
        hinted = retry_after_seconds(state.outcome.exception() if state.outcome else None)
        if hinted is not None:
            return min(hinted, backoff_max)
        return backoff(state)

    return wait


def read_response(call: Callable[[], T]) -> T:
    """``call()``, with the SDK's JSON error on a garbled body turned into a retryable one."""
    try:
        return call()
    except json.JSONDecodeError:
        raise UnreadableResponse() from None


def describe_failure(error: BaseException, timeout: float) -> str:
    if isinstance(error, openai.APITimeoutError):
        return f"timed out after {timeout:g} s"
    if isinstance(error, openai.APIConnectionError):
        return "could not connect"
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code}: {server_message(error)}"
    if isinstance(error, UnreadableResponse):
        return "the response body is not JSON"
    return type(error).__name__


def server_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:300]
    return (error.response.text or error.response.reason_phrase or "")[:300]


def configuration_hint(status: int) -> str:
    if status in (401, 403):
        return "check PROPDEX_LLM_API_KEY"
    if status == 404:
        return "check the model name and that the base URL ends in /v1"
    return "the server rejected the request format; check the model and llm_json_schema"


def configuration_error(
    error: openai.APIStatusError, what: str, model: str, base_url: str, secret: str
) -> LLMConfigurationError:
    message = (
        f"LLM server {display_url(base_url)} refused {what} for model {model!r} "
        f"with HTTP {error.status_code}: {server_message(error)} "
        f"({configuration_hint(error.status_code)})"
    )
    return LLMConfigurationError(scrub(message, secret))


def connect_failure(error: BaseException) -> str | None:
    """Why no connection to the server could be made (refused, no such host, connect timeout),
    or None for every other failure: a server that answered or accepted the connection is there."""
    if not isinstance(error, openai.APIConnectionError):
        return None
    # The HTTP layer's exception, by name: openai 1.x raises httpx's, later versions httpx2's,
    # whose classes are named alike (a read timeout is ReadTimeout, a dropped answer
    # RemoteProtocolError: a server that is there).
    cause = error.__cause__
    names = {cls.__name__ for cls in type(cause).__mro__} if cause is not None else set()
    if "ConnectTimeout" in names:
        return "connect timeout"
    if "ConnectError" in names:
        return str(cause) or "connection failed"
    return None


def call_with_retries(
    send: Callable[[], T],
    *,
    what: str,
    model: str,
    base_url: str,
    secret: str,
    max_attempts: int,
    backoff_max: float,
    timeout: float,
    unreachable_cooldown: float,
) -> T:
    """``send()`` with the retry policy; openai errors become propdex errors. No attempt
    starts once the run is cancelled (propdex.stopping), and an attempt that fails meanwhile,
    as the requests the stop cuts do, is RunStoppedError: not retried. A server known to be
    unreachable fails the request at once (propdex.llm.unreachable); one found unreachable by
    this request's retries is marked so for ``unreachable_cooldown`` seconds."""
    admission = unreachable.admit(base_url)
    token = object()  # this request, should it become the server's probe
    try:
        result = _retried(send, what=what, model=model, base_url=base_url, secret=secret,
                          # A trial after the cooldown decides the mark with one attempt.
                          max_attempts=1 if admission.trial else max_attempts,
                          backoff_max=backoff_max, timeout=timeout,
                          unreachable_cooldown=unreachable_cooldown, trial=admission.trial,
                          token=token)
    except LLMServerUnreachableError:
        raise  # the mark stands, renewed or set by another request
    except LLMError:
        unreachable.end_trial(admission, answered=True)
        raise
    except BaseException:
        unreachable.end_trial(admission, answered=False)
        raise
    finally:
        unreachable.end_probe(base_url, token)
    unreachable.end_trial(admission, answered=True)
    return result


def _retried(
    send: Callable[[], T], *, what: str, model: str, base_url: str, secret: str,
    max_attempts: int, backoff_max: float, timeout: float, unreachable_cooldown: float,
    trial: bool, token: object,
) -> T:
    def log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        reason = describe_failure(error, timeout) if error else "?"
        log.warning(
            "%s: attempt %d failed (%s); retrying in %.2f s",
            what,
            state.attempt_number,
            scrub(reason, secret),
            state.next_action.sleep if state.next_action else 0.0,
        )

    retrying = Retrying(
        stop=stop_after_attempt(max_attempts),
        wait=retry_wait(backoff_max),
        retry=retry_if_exception(is_transient),
        before_sleep=log_retry,
        reraise=True,
    )

    def attempt() -> T:
        check_not_stopped(what)
        if not trial:  # another request may have found the server gone meanwhile
            unreachable.check_reachable(base_url)
        try:
            return send()
        except Exception as error:
            if run_is_stopping():
                raise cut_off_error(what) from None
            if not trial and connect_failure(error) is not None:
                # One request retries a server that refused it; the others wait for its verdict.
                unreachable.await_probe(base_url, token, run_is_stopping)
            raise

    try:
        return retrying(attempt)
    except openai.APIStatusError as error:
        if is_context_overflow(error.status_code, server_message(error)):
            # This request's length, not the configuration: the other requests may fit.
            raise overflow_error(what, what.removesuffix(" request"),
                                 scrub(server_message(error), secret)) from None
        if error.status_code in CONFIGURATION_STATUSES:
            raise configuration_error(error, what, model, base_url, secret) from None
        attempts = retrying.statistics.get("attempt_number", 1)
        reason = describe_failure(error, timeout)
        message = f"{what} failed after {attempts} attempts: {reason}"
        raise LLMError(scrub(message, secret)) from None
    except (openai.APIConnectionError, UnreadableResponse) as error:
        attempts = retrying.statistics.get("attempt_number", 1)
        if (cause := connect_failure(error)) is not None:
            message = (f"server {display_url(base_url)} is unreachable: {what} could not "
                       f"connect in {attempts} attempt(s) ({cause}); its requests fail at once "
                       f"for the next {unreachable_cooldown:g} s: is the server running, and "
                       "is the base URL right?")
            raise unreachable.mark_unreachable(base_url, scrub(message, secret),
                                               unreachable_cooldown) from None
        reason = describe_failure(error, timeout)
        message = f"{what} failed after {attempts} attempts: {reason} ({display_url(base_url)})"
        raise LLMError(scrub(message, secret)) from None
    except openai.OpenAIError as error:  # e.g. a response body the SDK cannot read
        message = f"{what} failed: {type(error).__name__}: {str(error)[:300]}"
        raise LLMError(scrub(message, secret)) from None


# --------------------------------------------------------------------------- JSON answers

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def outermost_json(text: str) -> str:
    """The span from the first '{' or '[' to the last matching closer, else the text."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return text
    start = min(starts)
    end = text.rfind("}" if text[start] == "{" else "]")
    return text[start : end + 1] if end > start else text[start:]


def parse_json_answer(text: str) -> Any:
    """Parse a model's JSON answer tolerantly: code fences, prose around the JSON and
    trailing commas are accepted; truncated JSON is not (it raises ValueError)."""
    fenced = _FENCE.match(text)
    candidate = outermost_json(fenced.group(1) if fenced else text).strip()
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_TRAILING_COMMA.sub(r"\1", candidate))
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg} at char {error.pos})") from None


def validation_reason(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item["loc"]) or "answer"
        parts.append(f"{where}: {item['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def wrap_bare_list(data: Any, schema_model: type[BaseModel]) -> Any:
    """A bare JSON list where the model has a single list field is taken as that field."""
    fields = list(schema_model.model_fields)
    if isinstance(data, list) and len(fields) == 1:
        return {fields[0]: data}
    return data


def usage_of(completion: Any) -> Usage:
    usage = getattr(completion, "usage", None)
    return Usage(
        calls=1,
        prompt_tokens=(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0,
        completion_tokens=(getattr(usage, "completion_tokens", 0) or 0) if usage else 0,
    )


def cut_off_where(sent: Sent) -> str:
    """Where an answer stopped with finish_reason=length: its output cap, or short of it the
    server's own limit (llama.cpp ends an answer where its context window is full, however
    large the cap: a prompt of 3,000 tokens leaves a 4,096-token window 1,096)."""
    if sent.cap is None:
        return "the server's token limit (finish_reason=length)"
    spent = usage_of(sent.completion).completion_tokens
    if 0 < spent < sent.cap:
        return (f"the server's limit after {spent} tokens, short of its output cap "
                f"({sent.cap_field}={sent.cap}, finish_reason=length): is the context window full?")
    return f"its output cap ({sent.cap_field}={sent.cap}, finish_reason=length)"


def repair_request(reason: str, *, cut_off: bool) -> str:
    shorter = " Keep it shorter: the answer must fit in its output cap." if cut_off else ""
    return (
        f"Your previous answer could not be used: {reason}.{shorter} "
        "Reply again with only the corrected JSON object, in the format asked for above."
    )


def negotiation_of(settings: Settings, base_url: str, model: str) -> Negotiation:
    """The structured-output form and cap field settled (or to settle) for a server's model."""
    first = JSON_SCHEMA_BOUNDED if settings.llm_json_schema else PROMPTED
    cap_field = default_cap_field(settings.llm_max_tokens_field, base_url)
    return negotiation_for(base_url, display_url(base_url), model, first, cap_field)


@dataclass(frozen=True)
class CallRecord:
    """One chat completion as sent and answered (for compatibility runs and benchmarks)."""

    step: str
    mode: str  # structured-output form used
    cap: int | None  # output cap sent
    cap_field: str
    finish_reason: str | None
    usage_reported: bool  # the server sent a usage object
    prompt_tokens: int
    completion_tokens: int
    seconds: float


@dataclass
class Sent:
    completion: Any
    mode: str
    cap: int | None
    cap_field: str


class LLMClient(SharedClientUser):
    """Chat completions returning validated pydantic objects; thread-safe.

    Every error raised by ``chat_json`` carries ``.usage``: the tokens of the responses that
    did arrive before it (the pipeline counts them against the document). ``on_call``, when
    set, receives a ``CallRecord`` of every completion.
    """

    def __init__(self, settings: Settings):
        self.settings = settings
        self.base_url = (settings.llm_base_url or OPENAI_BASE_URL).rstrip("/")
        self._secret = api_key_value(settings.llm_api_key)
        self.limiter: RequestLimiter = limiter_for(
            self.base_url, settings.llm_concurrency, settings.llm_rpm
        )
        self.on_call: Callable[[CallRecord], None] | None = None

    def __repr__(self) -> str:
        return f"LLMClient(base_url={display_url(self.base_url)!r})"

    def negotiation(self, model: str) -> Negotiation:
        return negotiation_of(self.settings, self.base_url, model)

    def context_window(self, model: str) -> int | None:
        """The context window requests to ``model`` must fit, when known."""
        return context_window(self.settings.llm_context_window, self.base_url, model,
                              self._secret, self.settings.llm_timeout)

    def chat_json(
        self,
        model: str,
        messages: list[dict[str, str]],
        schema_model: type[M],
        *,
        step: str,
        context: dict[str, Any] | None = None,
        answer_format: str | None = None,
        check_context: dict[str, Any] | None = None,
    ) -> tuple[M, Usage]:
        """Ask for JSON matching ``schema_model``; one repair round on an invalid answer.

        ``answer_format`` describes the answer for forms where the server is not given the
        schema; None means ``messages`` describe it already when JSON schema is off, and a
        description is made from the schema when the negotiation falls back to such a form.
        ``check_context`` is added to the validation context only (what the answer's checks
        compare it with, e.g. the document text): ``context`` also shapes the schema and the
        output cap, which are cached by it.
        """
        usage = Usage()
        validation = {**(context or {}), **(check_context or {})} if check_context else context
        cap = output_cap(step, self.settings, derived_json_cap(schema_model, context))
        try:
            sent = self._complete(model, messages, schema_model, step, context, answer_format, cap)
            usage += usage_of(sent.completion)
            try:
                return self._answer(sent, schema_model, validation), usage
            except InvalidAnswer as first:
                log.info("%s: invalid answer (%s); asking once for a repair", step, first.reason)
                echo = first.content[:REPAIR_ECHO_CHARS] or "(empty answer)"
                repair = [
                    *messages,
                    {"role": "assistant", "content": echo},
                    {"role": "user", "content": repair_request(first.reason, cut_off=first.cut_off)},
                ]
            sent = self._complete(model, repair, schema_model, step, context, answer_format, cap)
            usage += usage_of(sent.completion)
            try:
                return self._answer(sent, schema_model, validation), usage
            except InvalidAnswer as second:
                message = f"{step}: invalid answer after one repair: {second.reason}"
                if second.check is not None:
                    raise LLMCheckError(message, second.check) from None
                kind = LLMAnswerCutOffError if second.cut_off else LLMOutputError
                raise kind(message) from None
        except LLMError as error:
            error.usage = usage  # type: ignore[attr-defined]
            raise

    def _complete(
        self, model: str, messages: list[dict[str, str]], schema_model: type[BaseModel],
        step: str, context: dict[str, Any] | None, answer_format: str | None, cap: int | None,
    ) -> Sent:
        negotiation = self.negotiation(model)
        deadline = current_deadline()  # the document's time limit, when one is set

        def attempt(mode: str, cap_field: str, refusals: frozenset[int]) -> Sent:
            return send_within_window(
                lambda window: attempt_within(mode, cap_field, refusals, window),
                self.settings.llm_context_window, self.base_url, model, self._secret,
                self.settings.llm_timeout)

        def attempt_within(mode: str, cap_field: str, refusals: frozenset[int], window: int | None) -> Sent:
            request: dict[str, Any] = {
                "model": model,
                "messages": self._described(messages, mode, schema_model, answer_format),
                "temperature": self.settings.llm_temperature,
            }
            form = response_format(mode, step, schema_model, context)
            if form is not None:
                request["response_format"] = form
            sent_cap = request_cap(cap, request["messages"], form, window, step=step)
            if sent_cap is not None:
                request[cap_field] = sent_cap

            def send() -> Any:
                with self.limiter.slot():
                    if deadline is not None:  # no attempt starts after it; none outlives it
                        deadline.check(f"{step} request")
                        request["timeout"] = min(self.settings.llm_timeout, deadline.remaining())
                    try:
                        return read_response(lambda: self._client.chat.completions.create(**request))
                    except openai.APIStatusError as error:
                        message = server_message(error)
                        if is_refusal(error.status_code, message, refusals):
                            raise Refused(error.status_code, message, error) from None
                        raise

            started = time.perf_counter()
            completion = call_with_retries(
                send,
                what=f"{step} request",
                model=model,
                base_url=self.base_url,
                secret=self._secret,
                max_attempts=self.settings.llm_max_attempts,
                backoff_max=self.settings.llm_backoff_max,
                timeout=self.settings.llm_timeout,
                unreachable_cooldown=self.settings.llm_unreachable_cooldown_s,
            )
            self._record(step, mode, sent_cap, cap_field, completion, time.perf_counter() - started)
            return Sent(completion, mode, sent_cap, cap_field)

        try:
            return negotiation.run(attempt)
        except Refused as refused:  # even prompted JSON was refused: the request itself is wrong
            raise configuration_error(refused.error, f"{step} request", model, self.base_url,
                                      self._secret) from None

    def _described(self, messages: list[dict[str, str]], mode: str,
                   schema_model: type[BaseModel], answer_format: str | None) -> list[dict[str, str]]:
        if mode not in DESCRIBED_MODES:
            return messages
        if answer_format is not None:
            return with_format(messages, answer_format)
        if self.settings.llm_json_schema:  # the caller counted on the schema reaching the model
            return with_format(messages, schema_description(schema_model))
        return messages

    def _record(self, step: str, mode: str, cap: int | None, cap_field: str, completion: Any,
                seconds: float) -> None:
        if self.on_call is None:
            return
        choices = getattr(completion, "choices", None) or []
        spent = usage_of(completion)
        self.on_call(CallRecord(
            step=step, mode=mode, cap=cap, cap_field=cap_field,
            finish_reason=choices[0].finish_reason if choices else None,
            usage_reported=getattr(completion, "usage", None) is not None,
            prompt_tokens=spent.prompt_tokens, completion_tokens=spent.completion_tokens,
            seconds=seconds,
        ))

    def _answer(
        self, sent: Sent, schema_model: type[M], context: dict[str, Any] | None
    ) -> M:
        """The validated answer of a completion, or InvalidAnswer saying why not."""
        choices = getattr(sent.completion, "choices", None) or []
        if not choices:
            raise InvalidAnswer("the response has no choices", "")
        choice = choices[0]
        content = choice.message.content or ""
        limit = self.settings.llm_max_response_chars
        if len(content) > limit:
            raise InvalidAnswer(
                f"answer of {len(content)} characters exceeds llm_max_response_chars={limit}",
                content[:REPAIR_ECHO_CHARS],
            )
        if choice.finish_reason == "length":
            raise InvalidAnswer(f"answer cut off at {cut_off_where(sent)}", content, cut_off=True)
        if not content.strip():
            refusal = getattr(choice.message, "refusal", None)
            reason = f"the model refused: {refusal[:200]}" if refusal else "empty answer"
            raise InvalidAnswer(reason, content)
        try:
            data = wrap_bare_list(parse_json_answer(content), schema_model)
        except ValueError as error:
            raise InvalidAnswer(str(error), content) from None
        try:
            return schema_model.model_validate(data, context=context)
        except ValidationError as error:
            checks = [e["ctx"]["reason"] for e in error.errors() if e["type"] == CHECK_FAILED]
            raise InvalidAnswer(validation_reason(error), content,
                                check=checks[0] if checks else None) from None


def error_usage(error: BaseException) -> Usage:
    """The usage an error from ``LLMClient.chat_json`` carries (zero for other errors)."""
    return getattr(error, "usage", Usage())
