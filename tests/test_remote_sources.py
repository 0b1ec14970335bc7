"""Sources in an object store: `ingest s3://bucket/prefix/` against moto's S3 server --
first run, unchanged re-run (nothing downloaded), changed and removed objects, refused and
unreachable stores (nothing indexed is lost)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from propdex.search import search
from propdex.store import Index
from tests.prefect_server import free_port
from tests.scripted_fixtures import scripted_environment
from tests.scripted_server import ScriptedServer

pytestmark = pytest.mark.prefect

HERONS = "Herons nest in tall trees near water. Herons eat fish and frogs."
OWLS = "Owls hunt small mammals at night. Barn owls nest in old barns."
KITES = "Kites hover over fields. Red kites eat carrion and small birds."


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[dict]:
    """moto's S3 server with a bucket, the run's environment (standard AWS_* variables and
    the scripted LLM and embedder), and a local index."""
    pytest.importorskip("s3fs", reason="s3fs is not installed: pip install 'propdex[s3]'")
    server_module = pytest.importorskip(
        "moto.server", reason="moto[server] is not installed: pip install 'propdex[test]'")
    import boto3

    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    bucket = f"propdex-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    scripted = ScriptedServer().start()
    cache = tmp_path_factory.mktemp("s3-sources-cache")
    environment = {**scripted_environment(scripted), "AWS_ENDPOINT_URL": endpoint,
                   "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1", "PROPDEX_CACHE_DIR": str(cache)}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environment.items():
            patch.setenv(name, value)
        yield {"client": client, "bucket": bucket, "cache": cache, "scripted": scripted,
               "db": tmp_path_factory.mktemp("s3-sources") / "db",
               "prefix": f"s3://{bucket}/notes/"}
    scripted.stop()
    server.stop()


def ingest(sources: list[str], db: Path) -> dict:
    """The run's summary, also of a run that ended Failed (a refused source)."""
    from flows.ingest import ingest as flow

    return flow(sources=sources, db=str(db), return_state=True).result(raise_on_failure=False)


def put(store: dict, key: str, text: str) -> None:
    store["client"].put_object(Bucket=store["bucket"], Key=key, Body=text.encode())


def copies(store: dict) -> list[Path]:
    return sorted((store["cache"] / "objects").rglob("*.*"))


def sources(db: Path) -> list[str]:
    return sorted(d["source"] for d in Index.open(str(db), create=False).documents())


@pytest.fixture(scope="module")
def runs(store) -> dict:
    put(store, "notes/herons.md", f"# Herons\n\n{HERONS}\n")
    put(store, "notes/owls.txt", OWLS)
    put(store, "notes/skip.bin", "not a document")
    put(store, "elsewhere/kites.txt", KITES)
    first = ingest([store["prefix"]], store["db"])
    for copy in copies(store):
        copy.unlink()
    unchanged = ingest([store["prefix"]], store["db"])
    copies_after_unchanged = copies(store)
    put(store, "notes/owls.txt", OWLS + " Owls swallow prey whole.")
    store["client"].delete_object(Bucket=store["bucket"], Key="notes/herons.md")
    second = ingest([store["prefix"]], store["db"])
    return {"first": first, "unchanged": unchanged, "second": second,
            "copies_after_unchanged": copies_after_unchanged}


def test_the_first_run_indexes_the_supported_objects_under_the_prefix(runs, store):
    prefix = store["prefix"]
    assert ([(prefix + "herons.md", "indexed"), (prefix + "owls.txt", "indexed")]) == sorted(
        (d["source"], d["status"]) for d in runs["first"]["documents"])


def test_an_unchanged_rerun_downloads_nothing(runs, store):
    assert ([], sorted([store["prefix"] + "herons.md", store["prefix"] + "owls.txt"]), []) == (
        runs["unchanged"]["documents"], sorted(runs["unchanged"]["unchanged"]),
        runs["copies_after_unchanged"])


def test_a_changed_object_is_processed_again_and_a_removed_one_pruned(runs, store):
    prefix = store["prefix"]
    assert ([(prefix + "owls.txt", "changed")], [prefix + "herons.md"], [prefix + "owls.txt"]) == (
        [(d["source"], d["reason"]) for d in runs["second"]["documents"]],
        runs["second"]["removed"], sources(store["db"]))


def test_citations_name_the_object_url(runs, store):
    hits = search(Index.open(str(store["db"]), create=False), "swallow prey", None,
                  mode="fts", level="chunks", k=1)
    assert [store["prefix"] + "owls.txt"] == [h.source for h in hits]


def test_a_prefix_outside_the_allowed_roots_is_refused(runs, store, monkeypatch):
    monkeypatch.setenv("PROPDEX_ALLOWED_ROOTS", f'["s3://{store["bucket"]}/notes"]')
    outside = f"s3://{store['bucket']}/elsewhere/"
    summary = ingest([outside], store["db"])
    assert ([outside], "outside the allowed roots", [store["prefix"] + "owls.txt"]) == (
        [path for path, _ in summary["refused"]],
        "outside the allowed roots" if "outside the allowed roots" in summary["refused"][0][1]
        else summary["refused"][0][1], sources(store["db"]))


def test_an_unreachable_store_is_refused_with_its_reason_and_nothing_is_lost(runs, store,
                                                                             monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    summary = ingest([store["prefix"]], store["db"])
    reason = summary["refused"][0][1]
    assert ([store["prefix"]], "cannot list", [], [store["prefix"] + "owls.txt"]) == (
        [path for path, _ in summary["refused"]], reason[:11], summary["removed"],
        sources(store["db"]))


def test_an_object_that_cannot_be_read_is_unreadable_with_its_reason(store):
    from propdex.pipeline.plan import Plan, fetch_changed
    from propdex.remote import RemoteObject
    from propdex.settings import Settings

    plan = Plan(fingerprint="fp")
    gone = RemoteObject(f"s3://{store['bucket']}/notes/gone.txt", "etag", 10)
    fetch_changed(plan, [gone], [], Settings(db=str(store["db"])), force=False, metadata=None)
    reason = "cannot read: no such bucket or object"
    assert ([(gone.url, reason)], []) == (
        [(url, why[:len(reason)]) for url, why in plan.unreadable], plan.to_process)
