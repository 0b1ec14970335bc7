"""LLM faults through a whole `propdex ingest` against the scripted server: sustained 429s
and a server that disappears mid-run. The document ends failed with the cause (error_kind
llm; unreachable, stopping the run, once the retries found the port closed), nothing of the
new version is written, and the version indexed earlier stays live.

The edit lies past the title/summary prefix, so those answers come from the cache and the
fault hits the chunk-level calls. (A fault in the title step fails the document the same
way, after that task's retries, which wait 2 + 10 s times retry_delay_scale.) Search uses
full-text mode because the embeddings endpoint is the faulty server too.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.cli_capture import run_cli
from tests.scripted_fixtures import scripted_environment
from tests.scripted_server import ScriptedServer, hang, rate_limited, reply

pytestmark = pytest.mark.prefect

INTRO = ("Basalt is a fine-grained volcanic rock that forms from the rapid cooling of lava. "
         "It makes up most of the ocean floor and large parts of Iceland and Hawaii.\n\n")
V1 = INTRO + "".join(
    f"Flow {n} of the plateau cooled over {n + 2} years and cracked into columns.\n\n"
    for n in range(1, 13)
)
V2 = V1 + "".join(
    f"Core {n} drilled in the plateau showed olivine crystals {n} millimetres long.\n\n"
    for n in range(1, 9)
)
PREFIX_TOKENS = "100"  # the smallest title/summary prefix: the edit is past it


def sustained_429(server: ScriptedServer) -> None:
    """Every request answers 429 with Retry-After."""
    server.script(*[rate_limited(retry_after=1)] * 1000)


def disappears(server: ScriptedServer) -> threading.Thread:
    """ANSWERED requests get their answer; the next ones hang until the server, stopped as
    soon as one of them arrives, is gone for good (connections dropped, then refused)."""
    server.script(*[reply()] * ANSWERED, *[hang(600)] * 1000)

    def stop_past_the_answered() -> None:
        for _ in range(12_000):  # at most ~2 min, should the run never get that far
            requests = server.requests
            if len(requests) > ANSWERED and sum(r.status == 200 for r in requests) >= ANSWERED:
                break
            time.sleep(0.01)
        server.stop()

    stopper = threading.Thread(target=stop_past_the_answered, name="scripted-server-stopper")
    stopper.start()
    return stopper


ANSWERED = 1
FAULTS = {"sustained 429": sustained_429, "server disappears": disappears}
EXPECTED_CAUSE = {
    "sustained 429": "failed after 2 attempts: HTTP 429: Rate limit reached",
    "server disappears": "request could not connect in 2 attempt(s)",
}
EXPECTED_KIND = {"sustained 429": ("llm", "LLMError"),
                 "server disappears": ("unreachable", "LLMServerUnreachableError")}
# A server that keeps refusing connections stops the run (exit 3); one that answers 429, 1.
EXPECTED_CODE = {"sustained 429": 1, "server disappears": 3}
# the statuses the fault answered (0: never answered), given how many requests arrived
EXPECTED_STATUSES = {
    "sustained 429": lambda arrived: Counter({429: arrived}),
    "server disappears": lambda arrived: Counter({200: ANSWERED, 0: arrived - ANSWERED}),
}



@pytest.fixture(scope="module", params=sorted(FAULTS))
def fault_run(request, tmp_path_factory) -> Iterator[dict]:
    """Index V1 against a healthy server, then ingest V2 under the fault."""
    root = tmp_path_factory.mktemp("llm-fault")
    source = root / "basalt.txt"
    source.write_text(V1, encoding="utf-8")
    db = str(root / "db")
    with pytest.MonkeyPatch.context() as env, ScriptedServer() as server:
        for name, value in {
            **scripted_environment(server),
            "PROPDEX_TITLE_PREFIX_TOKENS": PREFIX_TOKENS,
            "PROPDEX_SUMMARY_PREFIX_TOKENS": PREFIX_TOKENS,
        }.items():
            env.setenv(name, value)
        first = run_cli("ingest", str(source), "--db", db)
        server.reset()
        stopper = FAULTS[request.param](server)
        source.write_text(V2, encoding="utf-8")
        code, out, err = run_cli("ingest", str(source), "--db", db, "--json")
        if stopper is not None:
            stopper.join()  # before the server's own teardown stops it
        statuses = [r.status for r in server.requests]
    search = run_cli("search", "rapid cooling of lava", "--db", db, "--level", "chunks",
                     "--mode", "fts", "--json")
    status = run_cli("status", "--db", db, "--json")
    yield {"fault": request.param, "source": str(source), "first": first, "code": code,
           "err": err, "summary": json.loads(out), "statuses": statuses,
           "search": json.loads(search[1]), "status": json.loads(status[1]),
           "verify": run_cli("verify", "--db", db)}


def test_the_first_ingest_succeeded(fault_run):
    assert 0 == fault_run["first"][0]


def test_the_server_answered_as_the_fault_says(fault_run):
    statuses = fault_run["statuses"]
    assert EXPECTED_STATUSES[fault_run["fault"]](len(statuses)) == Counter(statuses)


def test_the_run_exits_with_the_faults_code(fault_run):
    assert EXPECTED_CODE[fault_run["fault"]] == fault_run["code"]


def test_the_document_outcome_names_the_cause(fault_run):
    (outcome,) = fault_run["summary"]["documents"]
    cause = EXPECTED_CAUSE[fault_run["fault"]]
    kind = EXPECTED_KIND[fault_run["fault"]][0]
    assert ("failed", kind, True) == (outcome["status"], outcome["error_kind"],
                                      cause in outcome["error"])


def test_the_failure_is_printed_with_its_cause(fault_run):
    line = fault_run["err"].strip().splitlines()[0]
    error_class = EXPECTED_KIND[fault_run["fault"]][1]
    assert (True, True) == (line.startswith(f"propdex: {fault_run['source']}: failed: {error_class}: "),
                            EXPECTED_CAUSE[fault_run["fault"]] in line)


def test_status_shows_the_failed_attempt(fault_run):
    (row,) = fault_run["status"]
    assert ("failed", True) == (row["status"], EXPECTED_CAUSE[fault_run["fault"]] in row["error"])


def test_the_indexed_version_stays_searchable(fault_run):
    hits = fault_run["search"]
    expected = ({fault_run["source"]}, True)
    assert expected == ({h["source"] for h in hits}, all(h["text"] in V1 for h in hits))


def test_no_partial_document_is_written(fault_run):
    # verify checks the live rows against the ledger and reports uncommitted leftovers.
    assert (0, "index consistent\n") == fault_run["verify"][:2]


def test_no_traceback_reaches_the_user(fault_run):
    assert "Traceback" not in fault_run["err"]
