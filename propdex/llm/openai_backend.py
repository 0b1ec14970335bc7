"""The ``openai`` LLM backend: every step is one JSON call through ``LLMClient``.

Per chunk that is two calls: one for its propositions and one grading all of them at once
(the source notebook grades each proposition in its own call).
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from propdex.checks.context import summary_problem, title_problem
from propdex.llm.base import CHARS_PER_TOKEN, LLMBackend, LLMResult
from propdex.llm.client import LLMClient, repair_request
from propdex.llm.context_window import estimated_prompt_tokens, prefix_chars_within_window
from propdex.llm.output_caps import derived_json_cap, output_cap
from propdex.llm.prompts import PROMPT_STEPS, Prompt, load_prompt
from propdex.llm.proposition_counts import most_propositions
from propdex.llm.schemas import GradesAnswer, PropositionsAnswer, SummaryAnswer, TitleAnswer
from propdex.llm.structured import JSON_SCHEMA_BOUNDED, response_format, with_format
from propdex.models import Scores, Usage
from propdex.settings import LLMStep, Settings

M = TypeVar("M", bound=BaseModel)

WHOLE_TEXT = "This is the whole document."
TRUNCATED_TEXT = "This is only the beginning of a longer document; the rest was cut off."
NO_VALUE = "(none)"
# The longest reason a repair request gives, about (three validation errors).
REPAIR_REASON_CHARS = 300
CONTEXT_ANSWERS: dict[str, type[BaseModel]] = {"title": TitleAnswer, "summary": SummaryAnswer}


def extent_note(truncated: bool) -> str:
    return TRUNCATED_TEXT if truncated else WHOLE_TEXT


def numbered(propositions: list[str]) -> str:
    """One proposition per line as "[i] text"; the grader answers by these indices."""
    return "\n".join(f"[{i}] {' '.join(text.split())}" for i, text in enumerate(propositions))


class OpenAIBackend(LLMBackend):
    name = "openai"

    def __init__(self, settings: Settings):
        self.settings = settings
        self.client = LLMClient(settings)
        self.prompts: dict[str, Prompt] = {step: load_prompt(step) for step in PROMPT_STEPS}

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.client!r})"

    def prompt_versions(self) -> dict[str, str]:
        return {step: prompt.version for step, prompt in self.prompts.items()}

    def _messages(self, step: str, **values: object) -> list[dict[str, str]]:
        # The answer's shape is added by the client only for structured-output forms that
        # do not carry the schema (see propdex.llm.structured): with json_schema it would
        # only cost tokens on every call.
        return self.prompts[step].messages(describe_format=False, **values)

    def _instructions(self, step: str) -> str:
        """The prompt's own words, which an answer must not merely repeat (see
        propdex.checks.context)."""
        prompt = self.prompts[step]
        return "\n".join((prompt.system, prompt.format, prompt.user, WHOLE_TEXT, TRUNCATED_TEXT))

    def _ask(self, step: str, model_step: LLMStep, messages: list[dict[str, str]],
             schema_model: type[M], context: dict[str, object] | None = None,
             check_context: dict[str, object] | None = None) -> tuple[M, Usage]:
        return self.client.chat_json(
            self.settings.model_for(model_step), messages, schema_model, step=step,
            context=context, answer_format=self.prompts[step].format, check_context=check_context,
        )

    def fitting_prefix_tokens(self, step: str, text: str, tokens: int, *, value_chars: int = 0) -> int:
        window = self.client.context_window(self.settings.model_for("context"))
        if window is None:
            return tokens
        schema_model = CONTEXT_ANSWERS[step]
        filler = "0" * value_chars  # counted a token a character: the most they can take
        # The prompt without the document, in its longest form: the answer's format described
        # and its schema sent (each form sends one or the other).
        messages = self._messages(step, extent=TRUNCATED_TEXT, hint=filler, title=filler, document="")
        fixed = estimated_prompt_tokens(
            with_format(messages, self.prompts[step].format),
            response_format(JSON_SCHEMA_BOUNDED, step, schema_model, None))
        cap = output_cap(step, self.settings, derived_json_cap(schema_model, None))
        # Room for the repair round too: it sends the prompt again with the invalid answer (at
        # most the cap) and the request to repair it, and small models often need it.
        repair = [{"role": "assistant", "content": ""},
                  {"role": "user", "content": repair_request("r" * REPAIR_REASON_CHARS, cut_off=True)}]
        fixed += estimated_prompt_tokens(repair, None) + (cap or 0)
        head = text[: tokens * CHARS_PER_TOKEN]
        fitting = prefix_chars_within_window(head, window, fixed, cap)
        if fitting == len(head) or fitting < CHARS_PER_TOKEN:
            # All of it fits; or nothing does, and the request fails naming the window and the fix.
            return tokens
        return fitting // CHARS_PER_TOKEN

    def title(self, text: str, *, truncated: bool, hint: str | None) -> LLMResult[str]:
        messages = self._messages(
            "title", extent=extent_note(truncated), hint=hint or NO_VALUE, document=text
        )
        answer, usage = self._ask("title", "context", messages, TitleAnswer, check_context={
            "document": text, "instructions": self._instructions("title"),
        })
        return LLMResult(answer.title, usage)

    def summary(self, text: str, *, title: str, truncated: bool) -> LLMResult[str]:
        messages = self._messages(
            "summary", title=title or NO_VALUE, extent=extent_note(truncated), document=text
        )
        answer, usage = self._ask("summary", "context", messages, SummaryAnswer, check_context={
            "document": text, "title": title, "instructions": self._instructions("summary"),
        })
        return LLMResult(answer.summary, usage)

    def answer_problem(self, step: str, answer: str, *, document: str, title: str = "") -> str | None:
        # The checks TitleAnswer and SummaryAnswer apply to an answer before it is cached.
        if step == "title":
            return title_problem(answer, document=document, instructions=self._instructions(step))
        return summary_problem(answer, document=document, title=title,
                               instructions=self._instructions(step))

    def propositions(
        self, chunk_text: str, *, title: str, section: str | None
    ) -> LLMResult[list[str]]:
        if not chunk_text.strip():
            return LLMResult([], Usage())
        most = most_propositions(chunk_text, self.settings)
        messages = self._messages(
            "propositions",
            min_propositions=self.settings.min_propositions,
            max_propositions=most,
            title=title or NO_VALUE,
            section=section or NO_VALUE,
            content=chunk_text,
        )
        answer, usage = self._ask("propositions", "propositions", messages, PropositionsAnswer, {
            "max_propositions": most,
            "max_chars": self.settings.max_proposition_chars,
        })
        return LLMResult(answer.propositions, usage)

    def grade(
        self, chunk_text: str, propositions: list[str], *, title: str, section: str | None
    ) -> LLMResult[list[Scores]]:
        if not propositions:
            return LLMResult([], Usage())
        # Title and section are left out on purpose: the grader judges each proposition
        # against the source text alone (clarity means "understandable without context"),
        # and every token here is paid once per chunk.
        messages = self._messages(
            "grading", source=chunk_text, propositions=numbered(propositions)
        )
        answer, usage = self._ask("grading", "grading", messages, GradesAnswer,
                                  {"count": len(propositions)})
        scores = [
            Scores(g.accuracy, g.clarity, g.completeness, g.conciseness) for g in answer.in_order()
        ]
        return LLMResult(scores, usage)

    def close(self) -> None:
        self.client.close()
