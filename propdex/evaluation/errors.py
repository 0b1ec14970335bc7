"""The evaluation's own failure kinds (both are PropdexErrors, so the CLI reports them)."""

from __future__ import annotations

from propdex.errors import PropdexError


class EvaluationError(PropdexError):
    """The evaluation cannot run: no indexed documents, incomparable vectors, a missing extra."""


class QuestionFileError(EvaluationError):
    """The questions file is missing or a line of it is not a valid question."""
