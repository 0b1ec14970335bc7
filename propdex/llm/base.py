"""The LLM backend interface: two implementations, ``offline`` (rules) and ``openai``.

Methods are synchronous and thread-safe: the pipeline fans calls out over a shared,
process-wide thread pool (see ``propdex.llm.dispatch``), which is what bounds concurrency
across every document of a run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from propdex.models import Scores, Usage

T = TypeVar("T")

# Characters per token used to bound prompt prefixes without a tokenizer download.
CHARS_PER_TOKEN = 4


@dataclass
class LLMResult(Generic[T]):
    value: T
    usage: Usage = field(default_factory=Usage)


def bounded_prefix(text: str, tokens: int) -> tuple[str, bool]:
    """The first ~``tokens`` tokens of ``text``, cut at a whitespace, and whether it was cut."""
    limit = tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text, False
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit], True


class LLMBackend(ABC):
    """What the pipeline needs from a language model.

    Errors: ``LLMConfigurationError`` stops the run (bad key, unknown model);
    ``LLMOutputError`` fails one unit (the chunk) with its reason; ``LLMError`` is a call that
    failed after its retries.
    """

    name: str

    @abstractmethod
    def prompt_versions(self) -> dict[str, str]:
        """Version of every prompt (or rule set) per step: title, summary, propositions, grading.
        Recorded in lineage and part of the cache key and the pipeline fingerprint."""

    def fitting_prefix_tokens(self, step: str, text: str, tokens: int, *, value_chars: int = 0) -> int:
        """Tokens (``CHARS_PER_TOKEN`` characters each) of the start of ``text`` that the
        ``step`` (title or summary) prompt carries: ``tokens``, or fewer where the model's
        context window would not hold them; ``value_chars``: the prompt's other values (the
        metadata title, the title)."""
        return tokens

    @abstractmethod
    def title(self, text: str, *, truncated: bool, hint: str | None) -> LLMResult[str]:
        """A document title from a bounded prefix; ``hint`` is e.g. the PDF metadata title."""

    @abstractmethod
    def summary(self, text: str, *, title: str, truncated: bool) -> LLMResult[str]:
        """A one-sentence summary of the document from a bounded prefix."""

    @abstractmethod
    def propositions(
        self, chunk_text: str, *, title: str, section: str | None
    ) -> LLMResult[list[str]]:
        """Atomic, self-contained propositions stated by ``chunk_text``."""

    @abstractmethod
    def grade(
        self, chunk_text: str, propositions: list[str], *, title: str, section: str | None
    ) -> LLMResult[list[Scores]]:
        """One Scores per proposition (same order), graded against the chunk text in one call."""

    def answer_problem(self, step: str, answer: str, *, document: str, title: str = "") -> str | None:
        """Why the checks, as they are now, reject ``answer``, a title or summary this backend
        gave earlier (from the content cache) for ``document`` (and ``title``), or None. The
        offline backend's answers are its rules' own and are not checked."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release network clients."""
