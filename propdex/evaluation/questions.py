"""The questions file: one JSON object per line.

Fields: ``question`` and ``answer`` (required); ``evidence`` (exact text spans from the
document; one string is taken as a list of one); ``pages`` (1-based pages holding the
answer, when spans are not known); ``source`` (the document's file name, matched against
the indexed sources by base name; without it the question is asked of every document);
``rubric`` (grading guidance for the answer-quality step); ``id`` (default ``q<line>``);
``origin`` (where the question comes from). Blank lines and lines starting with ``#`` are
skipped. Unknown fields are an error, so a misspelt ``evidance`` does not go unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePath
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from propdex.evaluation.errors import QuestionFileError

NonEmpty = Annotated[str, Field(min_length=1)]


class Question(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    question: NonEmpty
    answer: NonEmpty
    evidence: tuple[NonEmpty, ...] = ()
    pages: tuple[Annotated[int, Field(ge=1)], ...] = ()
    source: str | None = None
    rubric: str = ""
    origin: str | None = None

    @field_validator("evidence", mode="before")
    @classmethod
    def _one_span(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("question", "answer")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @property
    def source_name(self) -> str | None:
        """The base name the source is matched by (a path in the file is allowed)."""
        return PurePath(self.source).name if self.source else None


def parse_questions(lines: list[str], origin: str = "<questions>") -> list[Question]:
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{origin}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise QuestionFileError(f"{where}: not valid JSON ({error.msg})") from None
        if not isinstance(data, dict):
            raise QuestionFileError(f"{where}: expected a JSON object")
        data.setdefault("id", f"q{number}")
        try:
            question = Question.model_validate(data)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in item['loc']) or 'line'}: {item['msg']}"
                for item in error.errors()
            )
            raise QuestionFileError(f"{where}: {problems}") from None
        if question.id in seen:
            raise QuestionFileError(f"{where}: duplicate id {question.id!r}")
        seen.add(question.id)
        questions.append(question)
    return questions


def load_questions(path: str | Path) -> list[Question]:
    """The questions of a JSONL file; QuestionFileError names the line of any problem."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise QuestionFileError(f"cannot read {file}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise QuestionFileError(f"{file}: not UTF-8 text") from None
    questions = parse_questions(text.splitlines(), str(file))
    if not questions:
        raise QuestionFileError(f"{file}: no questions")
    return questions
