"""Scale-out: tasks on a Dask cluster (prefect-dask) and the index on S3-compatible storage.

The flow tests run the real ingest flow; LLM work uses the offline backend and embeddings
come from the scripted OpenAI-compatible server (deterministic, and no model to load in
every Dask worker). The object store is moto's S3 server on 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.runners import LOCAL_THREADS_PER_WORKER, task_runner_for, threads_for
from propdex.search import search
from propdex.search.rankings import LanceReader
from propdex.settings import Settings
from propdex.store import Index
from tests.pdf_factory import make_pdf
from tests.scripted_server import ScriptedServer

LIGHTHOUSE = [
    "The Lighthouse of Alexandria was built by the Ptolemaic Kingdom of Egypt. It stood on "
    "the island of Pharos in the harbour of Alexandria. The tower was completed around 280 BC.",
    "The lighthouse was damaged by several earthquakes between 956 and 1323. In 1480 the "
    "Mamluk sultan Qaitbay built a fortress on its site using some of the fallen stone.",
]
QUOKKA = ("# The quokka\n\nThe quokka is a small marsupial about the size of a domestic cat. "
          "It lives on Rottnest Island in Western Australia. Quokkas feed on grasses.\n")
FERRIES = ("# Ferries\n\nFerries run to Rottnest Island from Perth and Fremantle every day. "
           "The crossing from Fremantle takes about thirty minutes.\n")
GLACIER = ("# Glaciers\n\nThe Perito Moreno Glacier lies in Los Glaciares National Park in "
           "Argentina. Its front advances across Lake Argentino.\n")

# Columns that name the run or the clock: they differ between any two runs.
RUN_COLUMNS = {"run_id", "last_run_id", "ingested_at", "last_attempt_at"}
KEYS = {"documents": "doc_id", "chunks": "chunk_id", "propositions": "prop_id"}
requires_dask = pytest.mark.skipif(
    importlib.util.find_spec("prefect_dask") is None,
    reason="prefect-dask is not installed: pip install 'propdex[dask]'",
)


def make_sources(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    make_pdf(folder / "lighthouse.pdf", LIGHTHOUSE, title="The Lighthouse of Alexandria")
    (folder / "quokka.md").write_text(QUOKKA, encoding="utf-8")
    (folder / "ferries.md").write_text(FERRIES, encoding="utf-8")
    return folder


def run_ingest(sources: Path, db: str, **runner_settings) -> dict:
    from flows.ingest import ingest
    from flows.parameters import IngestOptions

    flow = ingest.with_options(task_runner=task_runner_for(Settings(**runner_settings)))
    return flow(sources=[str(sources)], db=db, options=IngestOptions(llm="offline"))


def comparable(index: Index) -> dict[str, list[dict]]:
    """Every row of the three tables without run and clock columns, in key order."""
    tables = {}
    for name, key in KEYS.items():
        table = index.table(name)
        rows = table.to_arrow().to_pylist() if table is not None else []
        rows = [{k: v for k, v in row.items() if k not in RUN_COLUMNS} for row in rows]
        tables[name] = sorted(rows, key=lambda r: r[key])
    return tables


@pytest.fixture(scope="module")
def embed_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="module")
def scripted_embeddings(embed_server, tmp_path_factory) -> Iterator[None]:
    """Embeddings from the scripted server for every Settings built in this module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROPDEX_EMBEDDER", "openai")
        patch.setenv("PROPDEX_EMBED_MODEL", "scripted-embed")
        patch.setenv("PROPDEX_EMBED_BASE_URL", embed_server.url + "/v1")
        patch.setenv("PROPDEX_EMBED_API_KEY", "sk-scaleout-test")
        yield


# Task runner selection --------------------------------------------------------------------
def test_no_dask_address_runs_tasks_on_threads():
    from prefect.task_runners import ThreadPoolTaskRunner

    runner = task_runner_for(Settings())
    assert (ThreadPoolTaskRunner, threads_for(Settings())) == (type(runner), runner._max_workers)


@requires_dask
def test_dask_address_connects_to_that_scheduler():
    runner = task_runner_for(Settings(dask_address="tcp://10.0.0.5:8786"))
    assert "tcp://10.0.0.5:8786" == runner.address


@requires_dask
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_local_dask_starts_a_cluster_of_worker_processes(workers):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    # No address: prefect-dask starts its default cluster class, distributed.LocalCluster.
    # With an API URL set, the workers inherit it: no ephemeral API is started here.
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:4200/api"}):
        runner = task_runner_for(Settings(dask_address="local", dask_workers=workers))
    kwargs = runner.cluster_kwargs
    expected = (None, None, workers, True, LOCAL_THREADS_PER_WORKER, {})
    actual = (runner.address, runner.cluster_class, kwargs["n_workers"], kwargs["processes"],
              kwargs["threads_per_worker"], kwargs["env"])
    assert expected == actual


@pytest.mark.parametrize(
    ("flags", "expected"),
    [([], None), (["--dask"], "local"), (["--dask", "tcp://10.0.0.5:8786"], "tcp://10.0.0.5:8786")],
)
def test_cli_dask_flag_gives_the_scheduler_address(flags, expected):
    from propdex.cli import build_parser

    assert expected == build_parser().parse_args(["ingest", "docs", *flags]).dask


# Storage options ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, None),
        ({"storage_endpoint": "http://127.0.0.1:9000", "storage_allow_http": True},
         {"endpoint": "http://127.0.0.1:9000", "allow_http": "true"}),
        ({"storage_region": "eu-west-1", "storage_access_key_id": "AKID",
          "storage_secret_access_key": "s3cr3t"},
         {"region": "eu-west-1", "aws_access_key_id": "AKID", "aws_secret_access_key": "s3cr3t"}),
    ],
)
def test_storage_options_come_from_settings(values, expected):
    assert expected == Settings(**values).storage_options


def test_storage_options_read_the_environment(monkeypatch):
    monkeypatch.setenv("PROPDEX_STORAGE_ENDPOINT", "http://127.0.0.1:9000")
    monkeypatch.setenv("PROPDEX_STORAGE_ALLOW_HTTP", "true")
    expected = {"endpoint": "http://127.0.0.1:9000", "allow_http": "true"}
    assert expected == Settings().storage_options


def test_storage_secret_is_not_in_the_settings_repr():
    assert "s3cr3t" not in repr(Settings(storage_secret_access_key="s3cr3t"))


# Dask: same index as a single-process run ----------------------------------------------
@pytest.fixture(scope="module")
def threads_and_dask(scripted_embeddings, tmp_path_factory) -> dict[str, dict]:
    sources = make_sources(tmp_path_factory.mktemp("dask") / "sources")
    runs = {}
    for name, runner in (("threads", {}), ("dask", {"dask_address": "local", "dask_workers": 2})):
        db = str(tmp_path_factory.mktemp(name) / "index")
        summary = run_ingest(sources, db, **runner)
        runs[name] = {"summary": summary, "tables": comparable(Index.open(db))}
    return runs


@requires_dask
@pytest.mark.prefect
def test_dask_run_indexes_every_document(threads_and_dask):
    statuses = [d["status"] for d in threads_and_dask["dask"]["summary"]["documents"]]
    assert ["indexed"] * 3 == statuses


@requires_dask
@pytest.mark.prefect
def test_dask_workers_report_their_task_runs_to_the_flows_api(threads_and_dask):
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    run_id = threads_and_dask["dask"]["summary"]["run_id"]
    with get_client(sync_client=True) as client:
        this_run = FlowRunFilter(id=FlowRunFilterId(any_=[run_id]))
        runs = client.read_task_runs(flow_run_filter=this_run)
    completed = sorted(r.task_key.split("-")[0] for r in runs
                       if r.state is not None and r.state.is_completed()
                       and r.task_key.startswith(("extract", "commit_document")))
    assert ["commit_document"] * 3 + ["extract"] * 3 == completed


@requires_dask
@pytest.mark.prefect
@pytest.mark.parametrize("table", list(KEYS))
def test_dask_run_gives_the_same_rows_as_a_threaded_run(threads_and_dask, table):
    assert threads_and_dask["threads"]["tables"][table] == threads_and_dask["dask"]["tables"][table]


# S3-compatible storage (moto server) ------------------------------------------------------
@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server_module = pytest.importorskip(
        "moto.server", reason="moto[server] is not installed: pip install 'propdex[test]'")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def s3_settings(s3_endpoint, scripted_embeddings, tmp_path_factory) -> Iterator[Settings]:
    """Settings for a fresh bucket, also exported as PROPDEX_* for the flow to read."""
    import boto3

    bucket = f"propdex-{uuid.uuid4().hex[:12]}"
    values = {
        "PROPDEX_STORAGE_ENDPOINT": s3_endpoint,
        "PROPDEX_STORAGE_REGION": "us-east-1",
        "PROPDEX_STORAGE_ACCESS_KEY_ID": "testing",
        "PROPDEX_STORAGE_SECRET_ACCESS_KEY": "testing",
        "PROPDEX_STORAGE_ALLOW_HTTP": "true",
        # An object-store db has no local folder for the LLM/embedding cache.
        "PROPDEX_CACHE_DIR": str(tmp_path_factory.mktemp("s3-cache")),
    }
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing",
                 ).create_bucket(Bucket=bucket)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in values.items():
            patch.setenv(name, value)
        yield Settings(db=f"s3://{bucket}/index")


def s3_index(settings: Settings) -> Index:
    return Index.open(settings.db_uri, create=False, storage_options=settings.storage_options)


def fts_sources(settings: Settings, query: str, source=None) -> list[str]:
    results = search(source or s3_index(settings), query, None, mode="fts", level="chunks",
                     k=5)
    return sorted(Path(r.source).name for r in results)


@pytest.fixture(scope="module")
def s3_runs(s3_settings, tmp_path_factory) -> dict:
    """A first ingest into the bucket, then a re-run after one file changed and one left."""
    sources = make_sources(tmp_path_factory.mktemp("s3") / "sources")
    first = run_ingest(sources, s3_settings.db)
    after_first = {"ferries": fts_sources(s3_settings, "ferries Fremantle crossing")}
    (sources / "quokka.md").write_text(QUOKKA + "\n" + GLACIER, encoding="utf-8")
    (sources / "ferries.md").unlink()
    second = run_ingest(sources, s3_settings.db)
    return {"first": first, "second": second, "after_first": after_first}


@pytest.mark.prefect
def test_s3_first_run_indexes_every_document(s3_runs):
    statuses = sorted(d["status"] for d in s3_runs["first"]["documents"])
    assert ["indexed"] * 3 == statuses


@pytest.mark.prefect
def test_s3_index_is_searchable_after_the_first_run(s3_runs):
    assert ["ferries.md"] == s3_runs["after_first"]["ferries"]


@pytest.mark.prefect
def test_s3_rerun_processes_only_the_changed_document(s3_runs):
    processed = [Path(d["source"]).name for d in s3_runs["second"]["documents"]]
    unchanged = [Path(s).name for s in s3_runs["second"]["unchanged"]]
    assert (["quokka.md"], ["lighthouse.pdf"]) == (processed, unchanged)


@pytest.mark.prefect
def test_s3_rerun_removes_the_deleted_document(s3_runs, s3_settings):
    assert [] == fts_sources(s3_settings, "ferries Fremantle crossing")


@pytest.mark.prefect
def test_s3_rerun_makes_the_changed_text_searchable(s3_runs, s3_settings):
    assert ["quokka.md"] == fts_sources(s3_settings, "Perito Moreno Glacier")


@pytest.mark.prefect
def test_s3_index_is_consistent_after_the_rerun(s3_runs, s3_settings):
    assert [] == s3_index(s3_settings).verify()


def test_s3_index_reads_nothing_from_an_empty_bucket(s3_settings):
    empty = s3_settings.model_copy(update={"db": s3_settings.db + "-empty"})
    assert ([], []) == (s3_index(empty).documents(), fts_sources(empty, "quokka"))


@pytest.mark.prefect
def test_s3_one_shot_search_reads_the_bucket_through_a_lance_reader(s3_runs, s3_settings):
    one_shot = LanceReader(s3_settings.db_uri, s3_settings.storage_options)
    assert ["quokka.md"] == fts_sources(s3_settings, "Perito Moreno Glacier", one_shot)


def test_s3_one_shot_search_of_an_empty_bucket_finds_nothing(s3_settings):
    empty = s3_settings.model_copy(update={"db": s3_settings.db + "-empty"})
    one_shot = LanceReader(empty.db_uri, empty.storage_options)
    assert (None, []) == (one_shot.live_documents().version,
                          fts_sources(empty, "quokka", one_shot))


@pytest.mark.prefect
def test_s3_reader_takes_a_commit_in(s3_runs, s3_settings):
    from tests.store_rows import make_version

    index = s3_index(s3_settings)
    reader = LanceReader(s3_settings.db_uri, s3_settings.storage_options)
    reader.rankings()
    dim = len(index.read("chunks", ["vector"])[0]["vector"])
    version = make_version("walrus", "r1", ["Walruses bask on Arctic ice floes."])
    for row in (*version.chunks, *version.propositions):
        row["vector"] = row["vector"][:1].repeat(dim)
    index.replace_document(*version.rows)
    assert ["walrus.txt"] == fts_sources(s3_settings, "walruses Arctic", reader)
