"""Deployments: prefect.yaml, serve.py and `propdex watch`, proven against real processes.

The unit tests at the top need no server. The others share one stack: `prefect server
start` on a free port of 127.0.0.1 with SQLite, the process work pool, `prefect deploy
--prefect-file deployments/prefect.yaml --all` from the repository root, and `prefect worker
start`. Runs are created through the REST API the Prefect UI uses and executed by the worker
in subprocesses (offline LLM backend, local MiniLM embeddings). The tests that start a
server of their own (a served run cancelled mid-extraction, a server backed by PostgreSQL)
are in test_deployment_servers.py.
"""

from __future__ import annotations

import copy
import datetime
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import lancedb
import pytest
import yaml

from propdex.cli import main as propdex_main
from propdex.ids import normalise_source
from propdex.sources import walk
from propdex.watch import source_changed_event, source_changes
from tests.pdf_factory import make_pdf
from tests.prefect_server import (
    REPOSITORY,
    PrefectStack,
    Process,
    prefect_command,
    prefect_server,
    run_prefect,
    wait_for,
)

POOL = "propdex-pool"
PREFECT_FILE = REPOSITORY / "deployments" / "prefect.yaml"
DEPLOYMENTS = {  # deployment name -> the name Prefect knows it by (flow/deployment)
    "ingest": "propdex-ingest/ingest",
    "reingest-document": "propdex-reingest-document/reingest-document",
    "evaluate": "propdex-evaluate/evaluate",
}
RUN_SECONDS = 420  # one flow run: a fresh subprocess imports Prefect and loads MiniLM
CATS = ("# Cats\n\nCats are small domesticated carnivores. A cat sleeps for about fifteen hours "
        "a day. The domestic cat was first tamed in the Near East around 7500 BC.\n")
OPTIONS = {"chunk_size": 200, "threshold": 6}  # fields edited in the run form
OWLS = ("Owls are nocturnal birds of prey. An owl can turn its head about 270 degrees. "
        "Most owls hunt small mammals, insects and other birds.")

real_server = pytest.mark.prefect  # a real Prefect server, worker and subprocess flow runs


def _yaml_deployments() -> dict[str, dict]:
    return {d["name"]: d for d in yaml.safe_load(PREFECT_FILE.read_text())["deployments"]}


# The event contract and the files (no server) ------------------------------------------

@pytest.mark.parametrize("db, payload", [
    (None, {"change": "modified"}),
    ("index", {"change": "modified", "db": str(Path("index").resolve())}),
])
def test_source_changed_event_names_the_file_in_its_resource_id(tmp_path, db, payload):
    source = tmp_path / "notes" / "a.md"
    expected = {
        "event": "propdex.source.changed",
        "resource": {"prefect.resource.id": f"propdex.source.{source}",
                     "prefect.resource.name": "a.md"},
        "payload": payload,
    }
    assert expected == source_changed_event(source, "modified", db)


@pytest.mark.parametrize("name, before, after, changes, expected_kind", [
    ("a.md", True, True, ["added", "deleted"], "modified"),  # an editor's atomic save
    ("a.md", False, True, ["added", "deleted"], "added"),
    ("a.pdf", True, True, ["modified"], "modified"),
    ("a.txt", True, False, ["added", "modified"], "deleted"),  # gone by the time the batch settled
    ("a.md", True, False, ["deleted"], "deleted"),
    ("a.txt", False, False, ["added", "deleted"], None),  # came and went: never indexed
    ("a.py", True, True, ["modified"], None),  # not a source
    (".a.md", True, True, ["modified"], None),  # hidden, as ingest skips it
    (".cache/a.md", True, True, ["modified"], None),
])
def test_source_changes_take_their_kind_from_the_file_system(tmp_path, name, before, after,
                                                              changes, expected_kind):
    from watchfiles import Change

    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if before:
        path.write_text("text")
    walked_before = walk(str(tmp_path))
    if after:
        path.write_text("text again")
    else:
        path.unlink(missing_ok=True)
    expected = {str(path): expected_kind} if expected_kind else {}
    assert expected == source_changes({(Change[c], str(path)) for c in changes}, walked_before,
                                      walk(str(tmp_path)))


def test_watch_refuses_to_start_without_a_prefect_server(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    code = propdex_main(["watch", str(tmp_path)])
    assert (2, True) == (code, "PREFECT_API_URL is not set" in capsys.readouterr().err)


def test_watch_names_a_missing_folder_before_asking_for_a_prefect_server(tmp_path, monkeypatch,
                                                                         capsys):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    code = propdex_main(["watch", str(tmp_path / "nope")])
    assert (2, f"propdex: {tmp_path / 'nope'}: not a folder\n") == (code, capsys.readouterr().err)


@pytest.mark.parametrize("payload, expected_db", [
    ({"change": "added", "db": "/srv/index"}, "/srv/index"),
    ({}, "propdex-db"),  # an event from elsewhere: the deployment's default index
])
def test_trigger_turns_the_event_into_reingest_parameters(payload, expected_db):
    """Rendered by Prefect's own server code, as the automation renders them."""
    from prefect.server.events.actions import RunDeployment
    from prefect.server.events.schemas.events import ReceivedEvent
    from prefect.types._datetime import now
    from prefect.utilities.schema_tools.hydration import HydrationContext, hydrate

    [trigger] = _yaml_deployments()["reingest-document"]["triggers"]
    parameters = copy.deepcopy(trigger["parameters"])
    RunDeployment._upgrade_v1_templates(parameters)
    RunDeployment._register_filters_if_needed()
    source = "/data/propdex.source.notes/b c.pdf"  # the prefix may recur inside the path
    event = ReceivedEvent(id=uuid.uuid4(), occurred=now("UTC"), event="propdex.source.changed",
                          resource={"prefect.resource.id": f"propdex.source.{source}"},
                          payload=payload)
    rendered = hydrate(parameters, HydrationContext(
        render_jinja=True, jinja_context={"event": event}, raise_on_error=True))
    assert {"source": source, "db": expected_db, "force": False} == rendered


def test_serve_offers_the_deployments_of_prefect_yaml():
    sys.path.insert(0, str(REPOSITORY / "deployments"))
    try:
        import serve
    finally:
        sys.path.remove(str(REPOSITORY / "deployments"))

    def served(d):
        return (d.name, d.parameters, [(s.schedule.cron, s.schedule.timezone, s.active)
                                       for s in d.schedules],
                [(t.expect, t.match.model_dump(), t.parameters) for t in d.triggers])

    def written(spec):
        return (spec["name"], spec["parameters"],
                [(s["cron"], s["timezone"], s["active"]) for s in spec.get("schedules", [])],
                [(set(t["expect"]), t["match"], t["parameters"]) for t in spec.get("triggers", [])])

    specs = serve.deployment_specs()
    deployments = [serve.load_flow(s).to_deployment(**serve.serve_options(s)) for s in specs]
    assert [written(s) for s in specs] == [served(d) for d in deployments]


# The stack -------------------------------------------------------------------------------

@dataclass
class Deployed:
    stack: PrefectStack
    worker: Process
    deployments: dict[str, object]  # name in prefect.yaml -> DeploymentResponse after deploy
    ingest_schedules: list[tuple[str, str | None]]  # (cron, timezone) as deployed

    def id(self, name: str) -> UUID:
        return self.deployments[name].id

    def client(self):
        from prefect.client.orchestration import SyncPrefectClient

        return SyncPrefectClient(api=self.stack.api_url)


def _pause_schedules(client, deployment_id: UUID) -> None:
    """The nightly schedule must not fire (and ingest the repository's examples) if a test
    run happens to cross 02:00 UTC."""
    for schedule in client.read_deployment_schedules(deployment_id):
        client.update_deployment_schedule(deployment_id, schedule.id, active=False)


def _deploy(stack: PrefectStack, allowed_root: Path) -> Deployed:
    """Create the pool, deploy prefect.yaml from the repository root, start a worker."""
    from prefect.client.orchestration import SyncPrefectClient

    run_prefect(["work-pool", "create", POOL, "--type", "process"], stack.env)
    run_prefect(["deploy", "--prefect-file", "deployments/prefect.yaml", "--all"], stack.env)
    with SyncPrefectClient(api=stack.api_url) as client:
        deployments = {name: client.read_deployment_by_name(full)
                       for name, full in DEPLOYMENTS.items()}
        ingest_id = deployments["ingest"].id
        schedules = [(s.schedule.cron, s.schedule.timezone)
                     for s in client.read_deployment_schedules(ingest_id)]
        _pause_schedules(client, ingest_id)
    # As an operator would: runs may read, and write indexes, only under the test's
    # temporary folders (by default only the deployment's own db could be written).
    stack.env["PROPDEX_ALLOWED_ROOTS"] = str(allowed_root)
    stack.env["PROPDEX_ALLOWED_DB_ROOTS"] = str(allowed_root)
    worker = stack.start("worker", prefect_command("worker", "start", "--pool", POOL))
    return Deployed(stack, worker, deployments, schedules)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> Iterator[Deployed]:
    """The Prefect server on SQLite, with everything deployed and a worker polling."""
    with prefect_server(tmp_path_factory.mktemp("prefect-sqlite")) as stack:
        yield _deploy(stack, tmp_path_factory.getbasetemp())


# Helpers ------------------------------------------------------------------------------

def _sources(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "cats.md").write_text(CATS, encoding="utf-8")
    make_pdf(folder / "owls.pdf", [OWLS], title="Owls")
    return folder


def _run_logs(client, flow_run_id: UUID) -> str:
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return "\n".join(log.message for log in logs)[-6000:]


def _finished(client, flow_run_id: UUID, alive: Callable[[], None]):
    """Wait for a flow run to reach a final state; returns the run (any final state)."""
    def final():
        run = client.read_flow_run(flow_run_id)
        return run if run.state and run.state.is_final() else None

    return wait_for(final, timeout=RUN_SECONDS, what=f"flow run {flow_run_id} to finish",
                    alive=alive)


def _assert_completed(stack: PrefectStack, client, run) -> None:
    assert run.state.is_completed(), (
        f"run {run.name} ended {run.state.type.value}: {run.state.message}\n"
        f"{_run_logs(client, run.id)}\n{stack.logs()}")


def _deployment_runs(client, deployment_id: UUID, matches: Callable[[object], bool]) -> list:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    runs = client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])))
    return [run for run in runs if matches(run)]


def _row_counts(db: Path) -> dict[str, int]:
    connection = lancedb.connect(str(db))
    return {name: connection.open_table(name).count_rows()
            for name in ("documents", "chunks", "propositions")}


def _indexed_sources(db: Path) -> list[str]:
    table = lancedb.connect(str(db)).open_table("documents")
    return sorted(row["source"] for row in table.to_arrow().to_pylist() if row["status"] == "indexed")


def _report_counts(markdown: str) -> dict[str, int]:
    """The totals rows of the run report ("| chunks | 3 |")."""
    return {name: int(value) for name, value in re.findall(r"^\| ([a-z ()]+) \| (\d+) \|$",
                                                            markdown, re.MULTILINE)}


def _report_of(client, flow_run_id: UUID) -> str:
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterId,
    )

    artifacts = client.read_artifacts(
        artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["propdex-ingest-report"])),
        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    assert 1 == len(artifacts)
    return artifacts[0].data


# Deployments as written in prefect.yaml --------------------------------------------------

@real_server
def test_prefect_yaml_deploys_every_flow_to_the_process_pool(deployed):
    expected = {name: POOL for name in DEPLOYMENTS}
    assert expected == {name: d.work_pool_name for name, d in deployed.deployments.items()}


@real_server
def test_ingest_deployment_runs_nightly(deployed):
    assert [("0 2 * * *", "UTC")] == deployed.ingest_schedules


@real_server
@pytest.mark.parametrize("name", ["ingest", "reingest-document"])
def test_runs_of_a_deployment_that_writes_the_index_go_one_at_a_time(deployed, name):
    # "Run" clicked twice, or the nightly schedule firing during a manual run: the next run
    # waits for a slot instead of processing the same documents at the same time.
    deployment = deployed.deployments[name]
    assert (1, "ENQUEUE") == (deployment.global_concurrency_limit.limit,
                              deployment.concurrency_options.collision_strategy.value)


@real_server
@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_run_form_describes_every_parameter(deployed, name):
    """The UI renders the form from the deployment's parameter schema."""
    schema = deployed.deployments[name].parameter_openapi_schema
    fields = [(f"{model}.{field}", spec) for model, definition in schema["definitions"].items()
              for field, spec in definition["properties"].items()]
    undescribed = [field for field, spec in [*schema["properties"].items(), *fields]
                   if not spec.get("description")]
    assert [] == undescribed


@real_server
@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_run_form_labels_every_parameter_in_words(deployed, name):
    """Prefect titles a flow's own parameters with their names unless the flow sets a label."""
    schema = deployed.deployments[name].parameter_openapi_schema
    assert [] == [field for field, spec in schema["properties"].items() if spec["title"] == field]


# A run from the UI's run form ----------------------------------------------------------

@dataclass
class FormRun:
    sources: Path
    db: Path
    report: str


@pytest.fixture(scope="module")
def form_run(deployed, tmp_path_factory) -> FormRun:
    """One run of the ingest deployment created as the UI's run form creates it: the
    deployment's defaults with some parameters edited."""
    folder = tmp_path_factory.mktemp("form-run")
    sources, db = _sources(folder / "sources"), folder / "index"
    with deployed.client() as client:
        run = client.create_flow_run_from_deployment(
            deployed.id("ingest"),
            parameters={"sources": [str(sources)], "db": str(db), "options": OPTIONS})
        run = _finished(client, run.id, deployed.stack.check_alive)
        _assert_completed(deployed.stack, client, run)
        return FormRun(sources, db, _report_of(client, run.id))


@real_server
def test_run_from_deployment_indexes_the_given_sources(form_run):
    expected = sorted(normalise_source(form_run.sources / n) for n in ("cats.md", "owls.pdf"))
    assert expected == _indexed_sources(form_run.db)


@real_server
def test_run_report_artifact_matches_the_stored_rows(form_run):
    report = _report_counts(form_run.report)
    expected = {"documents": report["indexed"], "chunks": report["chunks"],
                "propositions": report["propositions kept"] + report["propositions rejected"]}
    assert expected == _row_counts(form_run.db)


@real_server
def test_run_used_the_edited_options(form_run):
    """Every document records the fingerprint of the options the form sent."""
    from flows.parameters import IngestOptions
    from propdex.runtime import backend_for

    settings = IngestOptions(**OPTIONS).settings(str(form_run.db))
    versions = backend_for(settings).prompt_versions()
    expected = {"owls.pdf": settings.fingerprint(versions),
                "cats.md": settings.fingerprint(versions, pymupdf=False)}
    rows = lancedb.connect(str(form_run.db)).open_table("documents").to_arrow().to_pylist()
    assert expected == {Path(row["source"]).name: row["pipeline_version"] for row in rows}


@real_server
def test_run_form_db_outside_the_allowed_db_roots_is_refused(deployed, tmp_path_factory):
    """A run form naming an index folder outside PROPDEX_ALLOWED_DB_ROOTS fails with the
    reason, and nothing is written there."""
    sources = _sources(tmp_path_factory.mktemp("refused-db") / "sources")
    outside = Path("/tmp") / f"propdex-refused-db-{uuid.uuid4().hex[:8]}"
    with deployed.client() as client:
        run = client.create_flow_run_from_deployment(
            deployed.id("ingest"), parameters={"sources": [str(sources)], "db": str(outside)})
        run = _finished(client, run.id, deployed.stack.check_alive)
    assert (True, True, False) == (
        run.state.is_failed(), "outside the allowed database roots" in run.state.message,
        outside.exists())


# A schedule ----------------------------------------------------------------------------

@real_server
def test_interval_schedule_produces_a_run_the_worker_completes(deployed, tmp_path):
    from prefect.client.schemas.schedules import IntervalSchedule

    sources, db = _sources(tmp_path / "sources"), tmp_path / "index"
    first = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=10)
    with deployed.client() as client:
        [schedule] = client.create_deployment_schedules(
            deployed.id("ingest"),
            [(IntervalSchedule(interval=datetime.timedelta(seconds=30), anchor_date=first), True)],
            max_scheduled_runs=1, parameters={"sources": [str(sources)], "db": str(db)})
        try:
            def started():
                runs = _deployment_runs(client, deployed.id("ingest"), lambda r: (
                    r.auto_scheduled and r.parameters.get("db") == str(db)
                    and r.state is not None and not r.state.is_scheduled()))
                return runs[0] if runs else None

            picked = wait_for(started, timeout=RUN_SECONDS, what="a scheduled run to start",
                              alive=deployed.stack.check_alive)
        finally:
            # Deleting the schedule also deletes its runs not yet started.
            client.delete_deployment_schedule(deployed.id("ingest"), schedule.id)
        run = _finished(client, picked.id, deployed.stack.check_alive)
        _assert_completed(deployed.stack, client, run)
    assert 2 == _row_counts(db)["documents"]


# Event trigger -------------------------------------------------------------------------

@dataclass
class Watched:
    folder: Path
    db: Path
    created: object  # the flow run the first event triggered
    indexed: list[str]  # indexed sources once it completed


def _triggered_run(deployed: Deployed, client, source: Path, already: set[UUID]):
    wanted = normalise_source(source)

    def created():
        runs = _deployment_runs(client, deployed.id("reingest-document"), lambda r: (
            r.parameters.get("source") == wanted and r.id not in already))
        return runs[0] if runs else None

    run = wait_for(created, timeout=120, what=f"a run triggered for {wanted}",
                   alive=deployed.stack.check_alive)
    return _finished(client, run.id, deployed.stack.check_alive)


@pytest.fixture(scope="module")
def watched(deployed, tmp_path_factory) -> Iterator[Watched]:
    """`propdex watch FOLDER --db DB` runs while a file is added to FOLDER."""
    base = tmp_path_factory.mktemp("watch")
    folder, db = base / "sources", base / "index"
    folder.mkdir()
    watcher = deployed.stack.start("watch", [sys.executable, "-m", "propdex.cli", "watch",
                                             str(folder), "--db", str(db), "--debounce-ms", "300"])
    try:
        wait_for(lambda: "propdex: watching" in watcher.log.read_text(errors="replace"),
                 timeout=120, what="the watcher to start", interval=0.5,
                 alive=deployed.stack.check_alive)
        (folder / "cats.md").write_text(CATS, encoding="utf-8")
        with deployed.client() as client:
            run = _triggered_run(deployed, client, folder / "cats.md", set())
            _assert_completed(deployed.stack, client, run)
        yield Watched(folder, db, run, _indexed_sources(db))
    finally:
        deployed.stack.stop(watcher)


@real_server
def test_source_changed_event_from_watch_triggers_reingest(watched):
    parameters = {k: watched.created.parameters[k] for k in ("db", "force")}
    expected = ({"db": str(watched.db), "force": False}, [normalise_source(watched.folder / "cats.md")])
    assert expected == (parameters, watched.indexed)


@real_server
def test_deleted_file_event_removes_the_document(deployed, watched):
    source = watched.folder / "cats.md"
    with deployed.client() as client:
        # A write may reach the watcher as two batches: every run it caused must be over.
        earlier = _deployment_runs(client, deployed.id("reingest-document"),
                                   lambda r: r.parameters.get("source") == normalise_source(source))
        for run in earlier:
            _finished(client, run.id, deployed.stack.check_alive)
        source.unlink()
        deleted = _triggered_run(deployed, client, source, {run.id for run in earlier})
        _assert_completed(deployed.stack, client, deleted)
    assert {"documents": 0, "chunks": 0, "propositions": 0} == _row_counts(watched.db)


# serve.py --------------------------------------------------------------------------------

@real_server
def test_served_ingest_deployment_runs_in_the_serve_process(deployed, tmp_path):
    """deployments/serve.py registers the deployments and executes their runs itself, with
    no worker. Last on the stack: it stops the worker, and serving re-registers `ingest`."""
    sources, db = _sources(tmp_path / "sources"), tmp_path / "index"
    stack = deployed.stack
    stack.stop(deployed.worker)  # only the serve process can run what follows
    stack.env["PREFECT_RUNNER_POLL_FREQUENCY"] = "2"
    served = stack.start("serve", [sys.executable, "deployments/serve.py", "ingest"])
    try:
        with deployed.client() as client:
            run = client.create_flow_run_from_deployment(
                deployed.id("ingest"), parameters={"sources": [str(sources)], "db": str(db)})
            finished = _finished(client, run.id, stack.check_alive)
            _assert_completed(stack, client, finished)
    finally:
        stack.stop(served)
    assert 2 == _row_counts(db)["documents"]
