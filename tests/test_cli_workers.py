"""`propdex ingest` starts extraction workers ahead of the flow only for the PDFs it will read."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from propdex.cli import main
from propdex.extract import isolated

pytestmark = pytest.mark.prefect


def test_a_folder_of_markdown_starts_no_extraction_worker(tmp_path: Path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "herons.md").write_text(
        "# Herons\n\nHerons live near rivers and lakes. They eat fish they catch in shallow "
        "water.\n", encoding="utf-8")
    isolated.stop_workers()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["ingest", str(notes), "--db", str(tmp_path / "db")])
    assert (0, []) == (code, isolated._idle)
