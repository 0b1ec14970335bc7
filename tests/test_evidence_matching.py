"""Evidence matching across the layout reader's exponent caret."""

from __future__ import annotations

from propdex.evaluation.matching import TokenIndex, contains

ROW = "|Convolutional|O(k · n · d^2)|O(1)|O(logk(n))|"


def test_evidence_read_flat_matches_a_row_with_an_exponent_caret() -> None:
    assert contains(ROW, "Convolutional O(k · n · d2) O(1) O(logk(n))")


def test_an_evidence_span_over_an_exponent_keeps_its_offsets() -> None:
    text = f"Table 1\n{ROW}"
    assert [(text.index("Convolutional"), text.index("d^2") + 3)] == TokenIndex.of(text).find(
        "Convolutional O(k · n · d2")
