"""The final state of an ingest flow run, as the Prefect UI shows it for a scheduled run."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.prefect


def test_a_source_that_matches_nothing_ends_the_run_failed_naming_it(llm_env, tmp_path):
    from flows.ingest import ingest

    notes = tmp_path / "notes.md"
    notes.write_text("# Herons\n\nHerons nest in tall trees near water.\n", encoding="utf-8")
    gone = tmp_path / "unmounted"
    state = ingest(sources=[str(notes), str(gone)], db=str(tmp_path / "db"), return_state=True)
    summary = state.result(raise_on_failure=False)
    assert (True, f"sources not found: {gone}", ["indexed"], [str(gone)]) == (
        state.is_failed(), state.message, [d["status"] for d in summary["documents"]],
        summary["missing"])
