"""Granularity evaluation: chunks without and with contextual headers, sentences and
propositions compared as retrieval units on the same documents (Dense X Retrieval's
passage-level Recall@k, answer recall within a word budget, MRR; optional KITE-style
answer grading with an LLM).

matplotlib (the ``eval`` extra) is imported only to draw the plot, and the embedding model
loads only when a run needs it; Prefect is never imported (flows/evaluate.py wraps the
same steps as tasks).
"""

from propdex.evaluation.errors import EvaluationError, QuestionFileError
from propdex.evaluation.questions import Question, load_questions
from propdex.evaluation.run import DEFAULT_BUDGETS, DEFAULT_KS, run_evaluation
from propdex.evaluation.units import UNIT_KINDS, UNIT_LABELS

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_KS",
    "EvaluationError",
    "Question",
    "QuestionFileError",
    "UNIT_KINDS",
    "UNIT_LABELS",
    "load_questions",
    "run_evaluation",
]
