"""Object-store sources: an unchanged re-run over many small objects in moto's S3 server.

    python bench/bench_remote.py [--objects 1000] [--reruns 3]

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
copies the re-runs downloaded (must be 0: ETag and size match the ledger).
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--real-first", action="store_true",
                        help="index the objects with a real first ingest")
    args = parser.parse_args()

    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    bodies = {}
    for i in range(args.objects):
        words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(8))
        key = f"notes/note-{i:05d}.txt"
        bodies[f"s3://{bucket}/{key}"] = f"Note {i} is about {words}. Two sentences.".encode()
        client.put_object(Bucket=bucket, Key=key, Body=bodies[f"s3://{bucket}/{key}"])
    work = Path(tempfile.mkdtemp(prefix="propdex-bench-remote-"))
    cache = work / "cache"
    env = {**os.environ, "PYTHONPATH": str(REPO), "AWS_ENDPOINT_URL": endpoint,
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "PROPDEX_CACHE_DIR": str(cache),
           "PROPDEX_LLM": "offline"}
    command = [sys.executable, "-m", "propdex.cli", "ingest", f"s3://{bucket}/notes/",
               "--db", str(work / "db"), "--json"]

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    cpu_of_run: list[float] = []

    def run() -> tuple[float, dict]:
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
        print(f"first run: {first_s:.1f} s, {first['indexed']} indexed")
    else:
        os.environ.update(env)
        print(f"ledger written: {seed_ledger(f's3://{bucket}/notes/', work / 'db', bodies)} rows")
    for copy in (cache / "objects").rglob("*.txt"):
        copy.unlink()
    startup = []
    for _ in range(args.reruns):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        startup.append(time.perf_counter() - started)
    for n in range(args.reruns):
        seconds, summary = run()
        copies = sum(1 for _ in (cache / "objects").rglob("*.txt"))
        print(f"unchanged re-run {n + 1}: {seconds:.2f} s wall, {cpu_of_run[-1]:.2f} s CPU "
              f"(python start-up alone "
              f"{startup[n]:.2f} s), {len(summary['unchanged'])} unchanged, "
              f"{len(summary['documents'])} processed, {copies} objects downloaded")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    server.stop()


if __name__ == "__main__":
    main()
