"""Sources in an object store: `ingest s3://bucket/prefix/` against moto's S3 server behind a
proxy that counts requests and answers faults -- first run, unchanged re-run (nothing
downloaded), changed, re-uploaded and removed objects, refused and unreachable stores
(nothing indexed is lost), a store that fails for a while or for good."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from propdex.search import search
from propdex.store import Index
from tests.prefect_server import free_port
from tests.s3_proxy import S3Proxy
from tests.scripted_fixtures import scripted_environment
from tests.scripted_server import ScriptedServer

if TYPE_CHECKING:
    from propdex.pipeline.plan import Plan

pytestmark = pytest.mark.prefect

HERONS = "Herons nest in tall trees near water. Herons eat fish and frogs."
OWLS = "Owls hunt small mammals at night. Barn owls nest in old barns."
KITES = "Kites hover over fields. Red kites eat carrion and small birds."


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[dict]:
    """moto's S3 server with a bucket, a counting and fault-answering proxy in front of it,
    the run's environment (standard AWS_* variables and the scripted LLM and embedder), and
    a local index."""
    pytest.importorskip("s3fs", reason="s3fs is not installed: pip install 'propdex[s3]'")
    server_module = pytest.importorskip(
        "moto.server", reason="moto[server] is not installed: pip install 'propdex[test]'")
    import boto3

    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    proxy = S3Proxy(endpoint).start()
    bucket = f"propdex-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    scripted = ScriptedServer().start()
    cache = tmp_path_factory.mktemp("s3-sources-cache")
    environment = {**scripted_environment(scripted), "AWS_ENDPOINT_URL": proxy.endpoint,
                   "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1", "PROPDEX_CACHE_DIR": str(cache)}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environment.items():
            patch.setenv(name, value)
        yield {"client": client, "bucket": bucket, "cache": cache, "scripted": scripted,
               "db": tmp_path_factory.mktemp("s3-sources") / "db", "proxy": proxy,
               "prefix": f"s3://{bucket}/notes/"}
    proxy.stop()
    scripted.stop()
    server.stop()


def ingest(sources: list[str], db: Path) -> dict:
    """The run's summary, also of a run that ended Failed (a refused source)."""
    from flows.ingest import ingest as flow

    return flow(sources=sources, db=str(db), return_state=True).result(raise_on_failure=False)


def put(store: dict, key: str, text: str) -> None:
    store["client"].put_object(Bucket=store["bucket"], Key=key, Body=text.encode())


def reupload(store: dict, key: str) -> None:
    """The object again, with the same bytes, as a multipart upload: a new ETag."""
    client, bucket = store["client"], store["bucket"]
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    part = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=body)
    client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})


def gets(store: dict, key: str) -> int:
    """GETs of one object (not listings) since the proxy's counts were reset."""
    return store["proxy"].count("GET", f"/{store['bucket']}/{key}")


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
    copies_after_first = copies(store)
    store["proxy"].reset_counts()
    unchanged = ingest([store["prefix"]], store["db"])
    gets_of_unchanged = gets(store, "notes/")
    put(store, "notes/owls.txt", OWLS + " Owls swallow prey whole.")
    store["client"].delete_object(Bucket=store["bucket"], Key="notes/herons.md")
    second = ingest([store["prefix"]], store["db"])
    reupload(store, "notes/owls.txt")
    store["proxy"].reset_counts()
    touched = ingest([store["prefix"]], store["db"])
    gets_of_touched = gets(store, "notes/owls.txt")
    store["proxy"].reset_counts()
    after_touch = ingest([store["prefix"]], store["db"])
    return {"first": first, "unchanged": unchanged, "second": second, "touched": touched,
            "after_touch": after_touch, "copies_after_first": copies_after_first,
            "gets_of_unchanged": gets_of_unchanged, "gets_of_touched": gets_of_touched,
            "gets_after_touch": gets(store, "notes/owls.txt")}


def test_the_first_run_indexes_the_supported_objects_under_the_prefix(runs, store):
    prefix = store["prefix"]
    assert ([(prefix + "herons.md", "indexed"), (prefix + "owls.txt", "indexed")]) == sorted(
        (d["source"], d["status"]) for d in runs["first"]["documents"])


def test_an_unchanged_rerun_downloads_nothing(runs, store):
    assert ([], sorted([store["prefix"] + "herons.md", store["prefix"] + "owls.txt"]), 0) == (
        runs["unchanged"]["documents"], sorted(runs["unchanged"]["unchanged"]),
        runs["gets_of_unchanged"])


def test_a_run_leaves_no_copies_of_objects_in_the_cache(runs):
    assert [] == runs["copies_after_first"]


def test_an_object_reuploaded_with_the_same_bytes_is_downloaded_once_and_not_processed(
        runs, store):
    owls = store["prefix"] + "owls.txt"
    assert ([], [owls], 1, [owls], 0) == (
        runs["touched"]["documents"], runs["touched"]["unchanged"], runs["gets_of_touched"],
        runs["after_touch"]["unchanged"], runs["gets_after_touch"])


def test_a_changed_object_is_processed_again_and_a_removed_one_pruned(runs, store):
    prefix = store["prefix"]
    assert ([(prefix + "owls.txt", "changed")], [prefix + "herons.md"], [prefix + "owls.txt"]) == (
        [(d["source"], d["reason"]) for d in runs["second"]["documents"]],
        runs["second"]["removed"], sources(store["db"]))


def test_a_changed_object_is_downloaded_once_by_the_two_plannings_of_a_cli_run(runs, store):
    """The CLI plans (to learn that something changed) before the flow plans again."""
    from propdex.pipeline.plan import plan_sources
    from propdex.remote import discard_copies
    from propdex.settings import Settings

    put(store, "planned/kites.txt", KITES)
    settings = Settings(db=str(store["db"]))
    store["proxy"].reset_counts()
    plans = [plan_sources([f"s3://{store['bucket']}/planned/"], settings, force=False,
                          prune=False) for _ in range(2)]
    discard_copies(plans[-1].copies)
    assert 1 == gets(store, "planned/kites.txt")


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


def planned(store: dict, prefix: str, objects: list | None = None) -> Plan:
    """The plan of ``objects`` (default: those listed under ``prefix``) against an empty
    ledger; the copies it fetched are removed."""
    from propdex.pipeline.plan import Plan, fetch_changed  # noqa: F811 -- at run time
    from propdex.remote import discard_copies, list_objects
    from propdex.settings import Settings

    settings = Settings(db=str(store["db"]))
    plan = Plan(fingerprint="fp")
    listed = list_objects(f"s3://{store['bucket']}/{prefix}", settings) if objects is None \
        else objects
    fetch_changed(plan, listed, [], settings, force=False, metadata=None)
    discard_copies(plan.copies)
    return plan


def test_a_folder_marker_is_not_listed_as_a_document(store):
    from propdex.remote import list_objects
    from propdex.settings import Settings

    put(store, "markers/report.txt/", "")
    put(store, "markers/report.txt/inside.txt", KITES)
    listed = list_objects(f"s3://{store['bucket']}/markers/", Settings(db=str(store["db"])))
    assert [f"s3://{store['bucket']}/markers/report.txt/inside.txt"] == [o.url for o in listed]


def test_a_listing_answered_500_for_a_while_is_retried(store):
    from propdex.remote import list_objects
    from propdex.settings import Settings

    put(store, "flaky/kites.txt", KITES)
    store["proxy"].fail("GET", "list-type=2&prefix=flaky", 500, times=3)
    try:
        listed = list_objects(f"s3://{store['bucket']}/flaky/", Settings(db=str(store["db"])))
    finally:
        store["proxy"].heal()
    assert [f"s3://{store['bucket']}/flaky/kites.txt"] == [o.url for o in listed]


def test_a_listing_refused_for_its_credentials_says_so(store):
    from propdex.remote import ObjectStoreError, list_objects
    from propdex.settings import Settings

    store["proxy"].fail("GET", "list-type=2&prefix=secret", 403)
    try:
        with pytest.raises(ObjectStoreError) as refused:
            list_objects(f"s3://{store['bucket']}/secret/", Settings(db=str(store["db"])))
    finally:
        store["proxy"].heal()
    assert "cannot list: access denied (wrong credentials" == refused.value.reason[:45]


def test_an_object_that_stays_unavailable_fails_alone_naming_its_url(store):
    put(store, "down/kites.txt", KITES)
    put(store, "down/owls.txt", OWLS)
    store["proxy"].fail("GET", "down/kites.txt", 503)
    try:
        plan = planned(store, "down/")
    finally:
        store["proxy"].heal()
    url = f"s3://{store['bucket']}/down/"
    assert ([(url + "kites.txt", "cannot read: ")], [url + "owls.txt"]) == (
        [(source, reason[:13]) for source, reason in plan.unreadable],
        [item.source for item in plan.to_process])


def test_an_object_overwritten_after_listing_is_planned_at_the_version_read(store):
    from propdex.remote import list_objects
    from propdex.settings import Settings

    put(store, "moved/kites.txt", KITES)
    listed = list_objects(f"s3://{store['bucket']}/moved/", Settings(db=str(store["db"])))
    put(store, "moved/kites.txt", KITES + " Kites fork their tails.")
    head = store["client"].head_object(Bucket=store["bucket"], Key="moved/kites.txt")
    item = planned(store, "moved/", listed).to_process[0]
    assert (head["ETag"].strip('"'), head["ContentLength"]) == (item.etag, item.size)


def test_an_object_overwritten_while_it_is_read_fails_with_its_reason(store):
    from propdex.remote import ObjectStoreError, RemoteObject, fetch
    from propdex.settings import Settings

    put(store, "racing/kites.txt", KITES)
    store["proxy"].before_get = lambda path: put(store, "racing/kites.txt", OWLS) if (
        "racing/kites.txt" in path) else None
    url = f"s3://{store['bucket']}/racing/kites.txt"
    try:
        with pytest.raises(ObjectStoreError) as failed:
            fetch(RemoteObject(url, "listed", len(KITES)), Settings(db=str(store["db"])))
    finally:
        store["proxy"].before_get = None
    assert "the object changed while it was read" == failed.value.reason.split(";")[0][13:]


def test_watch_refuses_an_object_store_prefix(store):
    from propdex.errors import RemoteWatchError
    from propdex.watch import watch

    with pytest.raises(RemoteWatchError):
        watch(store["prefix"])
