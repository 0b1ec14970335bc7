"""Object-store sources: an unchanged re-run over many small objects in moto's S3 server,
and the memory and time of reading one large object.

    python bench/bench_remote.py [--objects 1000] [--reruns 3]
    python bench/bench_remote.py --large-mb 200 [--compare-with /path/to/other/checkout]

moto's S3 server runs on 127.0.0.1; --objects small text objects go under one prefix. With
--real-first, a first `propdex ingest s3://bucket/notes/` (offline LLM backend, the default
embedder) indexes them and its local copies are deleted; without it (the default: a first
run over 1,000 objects takes most of an hour on a busy 2-core host) the documents ledger is
written directly, as bench/serve_indexes.py writes its indexes: one indexed row per object
with the ETag and size the product's own listing gives, the content hash of its bytes and the
run's settings fingerprint -- all the unchanged re-run compares. Then `propdex ingest` runs
again --reruns times, each a new process, timed from its start to its exit (wall), with the
CPU it used (user + system: on a loaded host the wall time is mostly waiting for a core).
Reported: the first
run's time, each re-run's time next to a bare Python start-up, the objects indexed, and the
GETs of objects each run made (counted by the proxy of tests/s3_proxy.py in front of moto;
a re-run must make none: ETag and size match the ledger). Then --changed objects get new
bytes (one run), then the same bytes again as a multipart upload, i.e. a new ETag (two runs:
the first downloads them, the second must not), and the files left in the cache are counted.

With --large-mb, one object of that many random bytes (named .pdf) is read by
``propdex.remote.fetch`` in a new process: its resident memory before the read and at most
while reading (sampled every 10 ms), the read's time and the copy's size. --compare-with runs the same in another
checkout (e.g. a worktree of main), alternating the two --reruns times.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WORDS = ("herons owls kites foxes basalt granite quartz rivers harbours ferries glaciers "
         "meadows").split()


def seed_ledger(prefix: str, db: Path, bodies: dict[str, bytes]) -> int:
    """One indexed documents row per object, as a first run would leave it."""
    import hashlib

    import pyarrow as pa

    sys.path.insert(0, str(REPO))
    from propdex.ids import doc_id_for
    from propdex.remote import list_objects
    from propdex.runtime import backend_for
    from propdex.settings import Settings
    from propdex.store import Index
    from propdex.store.schema import DOCUMENTS, DOCUMENTS_SCHEMA

    settings = Settings(db=str(db))
    fingerprint = settings.fingerprint(backend_for(settings).prompt_versions())
    rows = [{"doc_id": doc_id_for(o.url), "source": o.url, "status": "indexed",
             "content_sha256": hashlib.sha256(bodies[o.url]).hexdigest(), "kind": "text",
             "pipeline_version": fingerprint, "run_id": "bench-seed",
             "last_run_id": "bench-seed", "object_etag": o.etag, "object_size": o.size}
            for o in list_objects(prefix, settings)]
    table = Index.open(str(db))._writable_table(DOCUMENTS, None)
    table.add(pa.Table.from_pylist(rows, schema=DOCUMENTS_SCHEMA))
    return len(rows)


# Run in a new process: read one object, sampling the process's resident memory meanwhile
# (the peak RSS of the whole process is set by the imports, before the read starts).
FETCH_ONE = """
import json, sys, threading, time
from pathlib import Path
from propdex.remote import fetch, list_objects
from propdex.settings import Settings

def rss_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

settings = Settings(db=sys.argv[2])
obj = list_objects(sys.argv[1], settings)[0]
before, peak, done = rss_mb(), [0.0], threading.Event()

def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss_mb())
        time.sleep(0.01)

sampler = threading.Thread(target=sample)
sampler.start()
started = time.perf_counter()
copy = fetch(obj, settings)
seconds = time.perf_counter() - started
done.set()
sampler.join()
path = copy[0] if isinstance(copy, tuple) else copy.path
print(json.dumps({"seconds": seconds, "rss_before_mb": before, "peak_rss_mb": peak[0],
                  "copy_mb": Path(path).stat().st_size / 2**20}))
"""


def large_object(client, bucket: str, env: dict, work: Path, args) -> None:
    """Peak RSS and time of reading one --large-mb object, here and in --compare-with."""
    key = "large/report.pdf"
    with tempfile.TemporaryFile() as body:
        for _ in range(args.large_mb):
            body.write(os.urandom(2**20))
        body.seek(0)
        client.upload_fileobj(body, bucket, key)
    checkouts = [str(REPO)] + ([args.compare_with] if args.compare_with else [])
    for n in range(args.reruns):
        for checkout in checkouts:
            cache = work / f"cache-{n}-{len(checkout)}"
            done = subprocess.run(
                [sys.executable, "-c", FETCH_ONE, f"s3://{bucket}/{key}", str(work / "db")],
                env={**env, "PYTHONPATH": checkout, "PROPDEX_CACHE_DIR": str(cache)},
                capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.exit(f"fetch failed in {checkout}: {done.stderr[-2000:]}")
            figures = json.loads(done.stdout)
            print(f"{checkout}: {args.large_mb} MB object read in {figures['seconds']:.1f} s, "
                  f"RSS {figures['rss_before_mb']:.0f} MB before, at most "
                  f"{figures['peak_rss_mb']:.0f} MB while reading, copy {figures['copy_mb']:.0f} MB")
            subprocess.run(["rm", "-rf", str(cache)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--real-first", action="store_true",
                        help="index the objects with a real first ingest")
    parser.add_argument("--changed", type=int, default=10,
                        help="objects then changed, and then re-uploaded with the same bytes")
    parser.add_argument("--large-mb", type=int, default=0,
                        help="measure reading one object of this many MB instead")
    parser.add_argument("--compare-with", help="another checkout to measure --large-mb in")
    args = parser.parse_args()

    import boto3
    from moto.server import ThreadedMotoServer

    sys.path.insert(0, str(REPO))
    from tests.s3_proxy import S3Proxy

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    proxy = S3Proxy(f"http://{host}:{port}").start()
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    client = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    work = Path(tempfile.mkdtemp(prefix="propdex-bench-remote-"))
    if args.large_mb:
        # Straight to moto: the proxy holds a whole answer in memory.
        large_object(client, bucket, {**os.environ, **aws_environment(f"http://{host}:{port}")},
                     work, args)
        server.stop()
        return
    bodies = {}
    for i in range(args.objects):
        words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(8))
        key = f"notes/note-{i:05d}.txt"
        bodies[f"s3://{bucket}/{key}"] = f"Note {i} is about {words}. Two sentences.".encode()
        client.put_object(Bucket=bucket, Key=key, Body=bodies[f"s3://{bucket}/{key}"])
    cache = work / "cache"
    env = {**os.environ, **aws_environment(proxy.endpoint), "PYTHONPATH": str(REPO),
           "PROPDEX_CACHE_DIR": str(cache), "PROPDEX_LLM": "offline"}
    command = [sys.executable, "-m", "propdex.cli", "ingest", f"s3://{bucket}/notes/",
               "--db", str(work / "db"), "--json"]

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    cpu_of_run: list[float] = []

    def run() -> tuple[float, dict]:
        proxy.reset_counts()
        started, cpu = time.perf_counter(), children_cpu()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        cpu_of_run.append(children_cpu() - cpu)
        if done.returncode != 0:
            sys.exit(f"ingest failed ({done.returncode}): {done.stderr[-2000:]}")
        return seconds, json.loads(done.stdout)

    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.objects} objects")
    if args.real_first:
        first_s, first = run()
        print(f"first run: {first_s:.1f} s ({first_s / args.objects:.2f} s per object, "
              f"{cpu_of_run[-1]:.1f} s CPU), {first['indexed']} indexed, "
              f"{proxy.count('GET', f'/{bucket}/notes/')} GETs of objects")
    else:
        os.environ.update(env)
        print(f"ledger written: {seed_ledger(f's3://{bucket}/notes/', work / 'db', bodies)} rows")
    startup = []
    for _ in range(args.reruns):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        startup.append(time.perf_counter() - started)
    for n in range(args.reruns):
        seconds, summary = run()
        print(f"unchanged re-run {n + 1}: {seconds:.2f} s wall, {cpu_of_run[-1]:.2f} s CPU "
              f"(python start-up alone "
              f"{startup[n]:.2f} s), {len(summary['unchanged'])} unchanged, "
              f"{len(summary['documents'])} processed, "
              f"{proxy.count('GET', f'/{bucket}/notes/')} GETs of objects, "
              f"{proxy.count('GET', 'list-type')} listing pages")
    keys = [f"notes/note-{i:05d}.txt" for i in range(min(args.changed, args.objects))]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=bodies[f"s3://{bucket}/{key}"] + b" More.")
    seconds, summary = run()
    print(f"{len(keys)} objects changed: {seconds:.2f} s wall, {len(summary['documents'])} "
          f"processed, {proxy.count('GET', f'/{bucket}/notes/')} GETs of objects")
    for key in keys:  # the same bytes again, as a multipart upload: a new ETag
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        part = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1,
                                  Body=body)
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                         MultipartUpload={"Parts": [{"PartNumber": 1,
                                                                     "ETag": part["ETag"]}]})
    for n in range(2):
        seconds, summary = run()
        print(f"{len(keys)} objects re-uploaded with the same bytes, run {n + 1}: "
              f"{seconds:.2f} s wall, {len(summary['documents'])} processed, "
              f"{proxy.count('GET', f'/{bucket}/notes/')} GETs of objects")
    copies = sum(1 for path in (cache / "objects").rglob("*") if path.is_file())
    print(f"files left under the cache's objects folder: {copies}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    proxy.stop()
    server.stop()


def aws_environment(endpoint: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


if __name__ == "__main__":
    main()
