"""bench/compat.py against the scripted server: every request kind runs once and is tabled."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripted_server import ScriptedServer

COMPAT = Path(__file__).resolve().parents[1] / "bench" / "compat.py"
STEPS = ["title", "summary", "propositions", "grading", "llm chunker (copy)", "embeddings"]


def compat_rows(server: ScriptedServer) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, str(COMPAT), "--base-url", server.url + "/v1", "--model", "scripted-model",
         "--embed-model", "scripted-embed"],
        capture_output=True, text=True, timeout=120, check=True)
    rows = [line.strip("|").split(" | ") for line in done.stdout.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[1:]}


@pytest.mark.parametrize(("refused", "form"), [((), "json_schema+bounds"), (("json_schema",), "json_object+schema")])
def test_every_step_is_run_once_in_the_form_the_server_accepts(refused, form):
    with ScriptedServer(refused_formats=refused) as server:
        rows = compat_rows(server)
    assert STEPS == list(rows)
    assert [form] * 4 == [rows[step][1] for step in STEPS[:4]]


def test_every_step_succeeds_against_a_compliant_server():
    with ScriptedServer() as server:
        rows = compat_rows(server)
    assert [] == [step for step, cells in rows.items() if not cells[0].startswith("ok")]


def test_the_table_shows_the_cap_and_finish_reason_of_each_request():
    with ScriptedServer() as server:
        rows = compat_rows(server)
    assert ("max_tokens=142", "stop", "yes") == tuple(rows["title"][2:5])
