"""Document title and summary: the document context its chunks' headers are built from
(propdex.pipeline.headers).

A title or summary only feeds the contextual headers, so losing one must not lose the
document: when the LLM's answer stays invalid (cut off at its output cap, say) or its call
fails after the retries, the offline backend's title or summary stands in. So does an answer
the deterministic checks reject twice (a placeholder title, an off-topic summary: see
``propdex.checks.context``; the client asks once for a repair). The fallback is
named in ``DocumentContext.fallback`` (the documents row and the run report show it), is
never cached, and the planner retries the document on the next run. A cached answer is
checked again before it is used: the checks may have changed since it was cached (their
version is in the pipeline fingerprint, not in the answer's key), and only an answer they
now reject is asked again. A configuration error (bad key, unknown model) still stops the
run, and so does a server found unreachable (LLMServerUnreachableError): no offline answer
is made for a document whose propositions would fail at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from propdex.cache import ResultCache, cache_key
from propdex.errors import LLMCheckError, LLMConfigurationError, LLMError
from propdex.llm.base import LLMBackend, LLMResult, bounded_prefix
from propdex.llm.offline import OfflineBackend
from propdex.models import DocumentContext, ExtractedDocument, Usage
from propdex.settings import Settings

log = logging.getLogger("propdex.pipeline")
# The checks' version the title and summary keys had when it left them: a constant, so a new
# checks version re-checks the cached answers rather than missing them.
KEYED_CHECKS = "checks-v1"


@dataclass
class Answer:
    text: str
    usage: Usage
    failed: str | None = None  # why the offline backend's answer stands in
    check: str | None = None  # the checks' reason, when they rejected the LLM's answer


def _ask_or_fall_back(
    step: str, key: str, cache: ResultCache, ask: Callable[[], LLMResult[str]],
    fall_back: Callable[[], LLMResult[str]], problem: Callable[[str], str | None], source: str,
) -> Answer:
    """The cached answer if the checks (``problem``) still accept it, else the asked answer,
    or the offline backend's when asking failed."""
    cached = cache.get_llm(key)
    if cached is not None:
        rejected = problem(cached)
        if rejected is None:
            return Answer(cached, Usage(cached_calls=1))
        log.info("%s: the cached %s fails the checks now (%s): asking again", source, step, rejected)
    try:
        result = ask()
    except LLMConfigurationError:
        raise
    except LLMError as error:
        # Imported here: openai (which the client imports) is slow to import and an offline
        # run never fails here.
        from propdex.llm.client import error_usage

        log.warning("%s: %s failed, using the offline backend's (%s)", source, step, error)
        check = error.reason if isinstance(error, LLMCheckError) else None
        return Answer(fall_back().value, error_usage(error), str(error), check)
    cache.put_llm(key, step, result.value)
    return Answer(result.value, result.usage)


def document_context(
    doc: ExtractedDocument, backend: LLMBackend, cache: ResultCache, settings: Settings
) -> DocumentContext:
    versions = backend.prompt_versions()
    offline = OfflineBackend(settings)  # rules only: cheap to build, nothing to close

    # The checks' version is not in the keys (KEYED_CHECKS): a cached answer is checked again
    # instead, and asked again only when the checks now reject it.
    # Where the model's context window is known and smaller, less of the text is sent (and
    # recorded as cut), so the prompt fits: else the request fails and the offline title stands in.
    title_tokens = backend.fitting_prefix_tokens("title", doc.text, settings.title_prefix_tokens,
                                                 value_chars=len(doc.title_hint or ""))
    title_text, title_cut = bounded_prefix(doc.text, title_tokens)
    key = cache_key(
        step="title", model=settings.model_for("context"), prompt=versions["title"],
        checks=KEYED_CHECKS, hint=doc.title_hint, truncated=title_cut, text=title_text,
    )
    title = _ask_or_fall_back(
        "title", key, cache,
        lambda: backend.title(title_text, truncated=title_cut, hint=doc.title_hint),
        lambda: offline.title(title_text, truncated=title_cut, hint=doc.title_hint),
        lambda answer: backend.answer_problem("title", answer, document=title_text), doc.source,
    )

    summary_tokens = backend.fitting_prefix_tokens("summary", doc.text, settings.summary_prefix_tokens,
                                                   value_chars=len(title.text))
    summary_text, summary_cut = bounded_prefix(doc.text, summary_tokens)
    key = cache_key(
        step="summary", model=settings.model_for("context"), prompt=versions["summary"],
        checks=KEYED_CHECKS, title=title.text, truncated=summary_cut, text=summary_text,
    )
    summary = _ask_or_fall_back(
        "summary", key, cache,
        lambda: backend.summary(summary_text, title=title.text, truncated=summary_cut),
        lambda: offline.summary(summary_text, title=title.text, truncated=summary_cut),
        lambda answer: backend.answer_problem("summary", answer, document=summary_text,
                                              title=title.text),
        doc.source,
    )

    answers = {"title": title, "summary": summary}
    fallbacks = [f"{step}: offline fallback ({a.failed})" for step, a in answers.items() if a.failed]
    return DocumentContext(
        title=title.text,
        summary=summary.text,
        title_truncated=title_cut,
        summary_truncated=summary_cut,
        model=settings.model_for("context"),
        usage=title.usage + summary.usage,
        fallback="; ".join(fallbacks) or None,
        checks_rejected={f"{step}: {a.check}": 1 for step, a in answers.items() if a.check},
    )
