"""Offline propositions from layout-reader text: Markdown markers are no part of a sentence."""

from __future__ import annotations

import pytest

from propdex.llm.offline import OfflineBackend
from propdex.settings import Settings

PARAGRAPH = ("## 3.2 Scaled Dot-Product Attention\n\n"
             "The attention function maps a query and a set of key-value pairs to an output. "
             "The output is computed as a weighted sum of the values.")


@pytest.fixture(scope="module")
def backend() -> OfflineBackend:
    return OfflineBackend(Settings())


@pytest.mark.parametrize(("footnote", "expected"), [
    ("> 4 To illustrate why the dot products get large, assume that the components are "
     "independent random variables.",
     "To illustrate why the dot products get large, assume that the components are "
     "independent random variables."),
    ("> † The work was performed while the author was at Google Brain.",
     "The work was performed while the author was at Google Brain."),
])
def test_a_footnote_quote_is_stated_without_its_marker_and_mark(backend, footnote: str,
                                                               expected: str) -> None:
    propositions = backend.propositions(f"{PARAGRAPH}\n\n{footnote}", title="Attention",
                                        section=None).value
    assert expected == propositions[-1]


def test_a_quote_over_several_lines_is_one_sentence(backend) -> None:
    quote = "> The output is computed as a weighted sum\n> of the values of the pairs."
    propositions = backend.propositions(quote, title="Attention", section=None).value
    assert ["The output is computed as a weighted sum of the values of the pairs."] == propositions


# The layout reader's table of contents (mck_energy's first page) above the opening prose.
CONTENTS = ("|Energy organizations in transition|3|\n"
            "|Operating model|8|\n"
            "|The productivity prize in oil and gas: Lessons from top performers|22|\n\n"
            "Organizations in the energy sector are evolving in response to the energy "
            "quadrilemma. They face new demands from customers and investors.")


def test_a_table_row_is_never_the_summary(backend) -> None:
    summary = backend.summary(CONTENTS, title="The State of Energy Organizations 2024",
                              truncated=False).value
    assert ("Organizations in the energy sector are evolving in response to the energy "
            "quadrilemma.") == summary
