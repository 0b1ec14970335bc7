"""Answer quality (optional, needs an LLM): an answer is written from each unit's top
passages and graded 0-10 against the reference answer and rubric, as KITE does.

Two JSON calls per (question, unit) through ``LLMClient.chat_json``, with versioned prompts
(``propdex/llm/prompts/eval_answer.v1.md`` and ``eval_grade.v1.md``). Both
answers are cached by content (step, model, prompt version, inputs), so a re-run only
pays for what changed. A call that stays invalid after its repair, or fails after its
retries, leaves that item ungraded (counted in the report); a configuration error (bad key,
unknown model) stops the evaluation, as it would stop an ingest.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from propdex.cache import ResultCache, cache_key
from propdex.errors import LLMConfigurationError, LLMError
from propdex.evaluation.errors import EvaluationError
from propdex.llm.client import LLMClient, error_usage
from propdex.llm.prompts import load_prompt
from propdex.models import Usage
from propdex.settings import Settings

ANSWER_STEP = "eval_answer"
GRADE_STEP = "eval_grade"
NO_RUBRIC = "(none: compare with the reference answer)"

M = TypeVar("M", bound=BaseModel)

# The tags of the evaluation prompts; a copy inside a value is defused so text cannot close
# its block early and smuggle in instructions.
_TAG = re.compile(r"<\s*(/?)\s*(question|passages|reference|rubric|candidate)\s*>", re.IGNORECASE)


class GeneratedAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: Annotated[str, Field(min_length=1, max_length=4000)]


class AnswerGrade(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: Annotated[str, Field(max_length=2000)]
    score: Annotated[int, Field(ge=0, le=10)]


@dataclass
class GradedAnswer:
    answer: str | None
    score: int | None  # None when the item could not be graded
    reason: str = ""
    error: str | None = None


@dataclass(frozen=True)
class AnswerJob:
    kind: str
    question_id: str
    question: str
    reference: str
    rubric: str
    passages: tuple[str, ...]


def eval_prompt_versions() -> dict[str, str]:
    return {step: load_prompt(step).version for step in (ANSWER_STEP, GRADE_STEP)}


def defuse(text: str) -> str:
    return _TAG.sub(lambda m: f"[{m.group(1)}{m.group(2)}]", text)


def numbered_passages(texts: tuple[str, ...] | list[str]) -> str:
    return "\n\n".join(f"[{i}] {' '.join(text.split())}" for i, text in enumerate(texts, 1))


def require_llm(settings: Settings) -> None:
    """Answer quality needs a real LLM: the offline backend cannot write or grade answers."""
    if settings.llm_backend != "openai":
        raise EvaluationError(
            "answer quality needs an LLM: set PROPDEX_LLM_BASE_URL (and PROPDEX_LLM_API_KEY) "
            "or PROPDEX_LLM=openai")


class AnswerGrader:
    """Writes and grades answers through one LLM client; thread-safe."""

    def __init__(self, settings: Settings, cache: ResultCache, client: LLMClient | None = None):
        require_llm(settings)
        self.settings = settings
        self.cache = cache
        self.client = client or LLMClient(settings)
        self.answer_model = settings.llm_model
        self.grade_model = settings.model_for("grading")
        self._usage = Usage()
        self._lock = threading.Lock()

    @property
    def usage(self) -> Usage:
        with self._lock:
            return self._usage

    def _count(self, usage: Usage) -> None:
        with self._lock:
            self._usage += usage

    def _ask(self, step: str, model: str, schema: type[M], values: dict[str, str]) -> M:
        prompt = load_prompt(step)
        key = cache_key(step=step, model=model, prompt=prompt.version, **values)
        cached = self.cache.get_llm(key)
        if cached is not None:
            self._count(Usage(cached_calls=1))
            return schema.model_validate(cached)
        messages = prompt.messages(describe_format=not self.settings.llm_json_schema,
                                   **{name: defuse(value) for name, value in values.items()})
        try:
            answer, usage = self.client.chat_json(model, messages, schema, step=step)
        except LLMError as error:
            self._count(error_usage(error))
            raise
        self._count(usage)
        self.cache.put_llm(key, step, answer.model_dump())
        return answer

    def grade(self, job: AnswerJob) -> GradedAnswer:
        written = self._ask(ANSWER_STEP, self.answer_model, GeneratedAnswer, {
            "question": job.question, "passages": numbered_passages(job.passages)})
        grade = self._ask(GRADE_STEP, self.grade_model, AnswerGrade, {
            "question": job.question, "reference": job.reference,
            "rubric": job.rubric.strip() or NO_RUBRIC, "candidate": written.answer})
        return GradedAnswer(written.answer, grade.score, grade.reason)

    def grade_all(self, jobs: list[AnswerJob]) -> dict[tuple[str, str], GradedAnswer]:
        """Every job's graded answer by (kind, question id). A configuration error stops
        the run; any other LLM failure leaves that one item ungraded."""
        results: dict[tuple[str, str], GradedAnswer] = {}

        def run(job: AnswerJob) -> GradedAnswer:
            try:
                return self.grade(job)
            except LLMConfigurationError:
                raise
            except LLMError as error:
                return GradedAnswer(None, None, error=str(error))

        workers = max(1, min(self.settings.llm_concurrency, len(jobs)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="propdex-eval") as pool:
            futures = {job: pool.submit(run, job) for job in jobs}
            try:
                for job, future in futures.items():
                    results[(job.kind, job.question_id)] = future.result()
            except LLMConfigurationError:
                for pending in futures.values():
                    pending.cancel()
                raise
        return results
