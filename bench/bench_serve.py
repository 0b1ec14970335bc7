"""Serving figures: cold CLI search, warm HTTP search and recall, concurrent clients during
commits -- all through the product's path (propdex.search.search behind IndexReader).

    python bench/bench_serve.py [--sizes 100000 1000000] [--queries 100] [--cold-runs 10]
                                [--clients 32] [--seconds 60]
                                [--workers 1 2] [--ingest-nice 0 19] [--writer-interval 1]
                                [--corpus ../shared/corpus]

Indexes: bench/serve_indexes.py (N propositions in N/100 documents, MiniLM-clustered
vectors, cached under the system temp folder). Queries: held-out corpus sentences, embedded
by the configured embedder (PROPDEX_EMBEDDER, default MiniLM) inside the product.

1. Cold CLI: `python -m propdex.cli search QUERY --db DB --json`, a new process each time,
   wall time (imports, embedder load, index open, search) -- at the smallest size only; and
   the same with PROPDEX_SERVER_URL naming the running service.
2. Warm HTTP: `propdex serve --db DB` in its own process; one client sends the queries one
   after the other (POST /search, k=10, default level and mode); p50 / p95 wall per request,
   and the service's RSS once it answered.
3. Recall@10 of the same function, in-process: the search as served (through the tables'
   IVF_FLAT indexes) against the same call searching every vector
   (LanceReader(exact=True)); recall = shared chunk ids / exact chunk ids.
4. Concurrency (smallest size, on a copy of its index): --clients threads query the service
   for --seconds while (a) a real `propdex ingest` of generated text files commits documents
   (offline LLM backend, same embedder) and (b) a writer process replaces benchmark documents
   over and over (--writer-interval seconds apart; 0: as fast as it can), each time first
   appending an *uncommitted* version whose rows carry the query vectors themselves (the best
   possible matches) and the text "UNCOMMITTED". Reported: requests, errors, p50 / p95, the
   service's CPU, results that came from an uncommitted run (must be 0), and how long after
   its replacement began each writer round was first in an answer; first, as a reference,
   the same clients for 20 s with nothing committing (each query sent once before, so that
   the service has embedded it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from serve_indexes import (  # noqa: E402  (bench/ is not a package)
    CHUNKS_PER_DOC,
    DIM,
    Sentences,
    add_corpus_argument,
    build,
    load_sentences,
    use_corpus,
)

K = 10
UNCOMMITTED = "UNCOMMITTED"
COMMITTED = "committed"  # the writer's committed rows: "committed ROUND chunk|proposition I"
WRITTEN = re.compile(rf"{COMMITTED} (\d+) (?:chunk|proposition) \d+$")
INGEST_DOCUMENTS = 150  # text files of 30 corpus sentences: commits all through the window
QUIET_SECONDS = 20  # the clients alone first, as a reference for the run with commits


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def environment() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}
    env.pop("PROPDEX_SERVER_URL", None)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def service(db: Path, log: Path, workers: int = 1):
    """`propdex serve --db DB --workers N` on a free port; yields (url, seconds until it
    answered, pid of the command)."""
    import httpx

    port = free_port()
    started = time.perf_counter()
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "propdex.cli", "serve", "--db", str(db), "--port", str(port),
             "--workers", str(workers)],
            # A session of its own, as a service started from its own terminal or by an
            # init system: with autogroup scheduling (the Linux default) CPU is shared
            # between sessions first, and the clients' and writer's session is not its own.
            env=environment(), stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    answered: set[int] = set()  # worker pids: ready once every worker has answered
    try:
        while len(answered) < workers:
            if process.poll() is not None:
                raise RuntimeError(f"propdex serve exited: {log.read_text()}")
            try:
                answered.add(httpx.get(url + "/health", timeout=5).json()["pid"])
            except httpx.TransportError:
                time.sleep(0.2)
        yield url, time.perf_counter() - started, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


# 1. Cold CLI -------------------------------------------------------------------------------
def cold_cli(db: Path, queries: list[str], runs: int,
             server_url: str | None = None) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of each new `propdex search` process. On a busy
    shared machine the wall time is mostly waiting for a core; the CPU time is what the
    process needs, about its wall time on an idle machine (it runs on one core)."""
    env = environment()
    if server_url:
        env["PROPDEX_SERVER_URL"] = server_url
    walls, cpus = [], []
    for i in range(runs):
        args = [sys.executable, "-m", "propdex.cli", "search", queries[i % len(queries)],
                "--json", *([] if server_url else ["--db", str(db)])]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(args, env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0 or not json.loads(done.stdout):
            raise RuntimeError(f"cold search failed: {done.stderr[-2000:]}")
    return walls, cpus


# 2. Warm HTTP ------------------------------------------------------------------------------
def _rss_mib(pid: int) -> float:
    """Resident memory of a process (MiB) from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its child processes (a service's workers)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    return cpu_seconds(pid) + sum(tree_cpu_seconds(kid) for kid in kids)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The default search (propdex.search.DEFAULT_LEVEL / DEFAULT_MODE), and the single vector
# search over propositions the targets were first set for.
CONFIGS = {"default": {}, "propositions, vector": {"level": "propositions", "mode": "vector"}}


class Connection:
    """One keep-alive HTTP/1.1 connection to the service, POSTing JSON: the benchmark's
    client, a socket and the few lines of HTTP/1.1 the service's answers need (a status line,
    headers, a Content-Length body). Why not a client library: the 32 clients share the
    service's two cores, and what they spend is taken from the searches: httpx and the
    standard library's http.client (its header parsing, through the email package) spent a
    large share of the service's own CPU per request (bench/RESULTS.md)."""

    def __init__(self, url: str, timeout: float = 60):
        host, _, port = url.removeprefix("http://").partition(":")
        self._address = (host, int(port))
        self._host = f"{host}:{port}".encode()
        self._timeout = timeout
        self._socket: socket.socket | None = None
        self._buffer = b""

    def post(self, path: str, body: dict) -> Any:
        payload = json.dumps(body).encode()
        if self._socket is None:
            self._socket = socket.create_connection(self._address, timeout=self._timeout)
            self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._buffer = b""
        self._socket.sendall(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json"
                             b"\r\nContent-Length: %d\r\n\r\n%s"
                             % (path.encode(), self._host, len(payload), payload))
        status_line, _, headers = self._read_head().partition(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        fields = {name.strip().lower(): value.strip() for name, _, value in
                  (line.partition(b":") for line in headers.split(b"\r\n"))}
        if b"content-length" not in fields:  # the service never chunks a JSON answer
            raise RuntimeError(f"POST {path}: HTTP {status} without a Content-Length")
        data = self._read(int(fields[b"content-length"]))
        if fields.get(b"connection", b"").lower() == b"close":
            self.close()
        if status != 200:
            raise RuntimeError(f"POST {path}: HTTP {status}: {data[:200]!r}")
        return json.loads(data)

    def _read_head(self) -> bytes:
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            self._receive()
        head, self._buffer = self._buffer[:end], self._buffer[end + 4:]
        return head

    def _read(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._receive()
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _receive(self) -> None:
        assert self._socket is not None
        chunk = self._socket.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the service closed the connection")
        self._buffer += chunk

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def warm_http(url: str, queries: list[str], options: dict) -> list[float]:
    times = []
    client = Connection(url)
    try:
        for query in queries[:5]:  # connection, caches
            client.post("/search", {"query": query, "k": K, **options})
        for query in queries:
            started = time.perf_counter()
            client.post("/search", {"query": query, "k": K, **options})
            times.append((time.perf_counter() - started) * 1000)
    finally:
        client.close()
    return times


# 3. Recall ---------------------------------------------------------------------------------
def recall_at_k(db: Path, queries: list[str], options: dict) -> tuple[float, float, float]:
    """Mean recall@10 of the served search against exact search through the same function,
    and the in-process p50 of each (ms). Exact: every vector compared, the tables' vector
    indexes left out."""
    from propdex.api import IndexReader
    from propdex.search import search
    from propdex.search.rankings import LanceReader
    from propdex.settings import Settings

    reader = IndexReader(Settings(db=str(db)))
    exact = LanceReader(reader.index.uri, exact=True)
    reader.warm_up()
    served_source = reader.reader
    hits, wanted, fast, slow = 0, 0, [], []
    for query in queries:
        vector = reader.embedder.embed_query(query)
        started = time.perf_counter()
        served = {r.chunk_id for r in search(served_source, query, vector, k=K, **options)}
        fast.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        truth = {r.chunk_id for r in search(exact, query, vector, k=K, **options)}
        slow.append((time.perf_counter() - started) * 1000)
        hits += len(served & truth)
        wanted += len(truth)
    return hits / wanted, statistics.median(fast), statistics.median(slow)


# 4. Concurrency ----------------------------------------------------------------------------
@dataclass
class Load:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    uncommitted: int = 0
    first_seen: dict[int, float] = field(default_factory=dict)  # writer round -> time.time()
    lock: threading.Lock = field(default_factory=threading.Lock)


def _writer(db: str, vectors: np.ndarray, stop, commits, nice: int, interval: float) -> None:
    """Replace benchmark documents in turn; before each commit, append an uncommitted
    version of another document made of the query vectors themselves. Runs in a process of
    its own (its Python work would otherwise hold up the clients' threads and count in their
    latencies); puts (round, when its replacement began) on ``commits`` once it is committed."""
    from propdex.cli.priority import lower_priority
    from propdex.store import Index

    os.setsid()  # its own session, like the ingest's (see service())
    lower_priority(nice)  # a second writer of the index: at the ingest's priority
    index = Index.open(db, dim=DIM)
    rng = np.random.default_rng(7)
    round_ = 0
    while not stop.is_set():
        round_ += 1
        victim, churn = f"doc-{round_ % 50:05d}", f"doc-{50 + round_ % 50:05d}"
        index._append_rows(index.prepare_replacement(*_version(
            victim, f"open-{round_}", vectors[rng.integers(0, len(vectors), CHUNKS_PER_DOC)],
            f"{UNCOMMITTED} {round_}")))
        # Timed from before the replacement: taken after it, a writer starved of the CPU
        # (at niceness 19) read the clock seconds after its commit was already served.
        started = time.time()
        index.replace_document(*_version(
            churn, f"bench-{round_}", vectors[rng.integers(0, len(vectors), CHUNKS_PER_DOC)],
            f"{COMMITTED} {round_}"))
        commits.put((round_, started))
        stop.wait(interval)  # 0: flat out


def _version(doc_id: str, run_id: str, vectors: np.ndarray, text: str):
    source = f"/bench/corpus/{doc_id}.pdf"
    chunks, props = [], []
    for i, vector in enumerate(vectors):
        chunk_id = f"{doc_id}:c{i}"
        chunks.append({"chunk_id": chunk_id, "doc_id": doc_id, "ordinal": i,
                       "text": f"{text} chunk {i}", "page_start": i + 1, "page_end": i + 1,
                       "char_start": i * 100, "char_end": i * 100 + 50, "source": source,
                       "run_id": run_id, "vector": vector})
        props.append({"prop_id": f"{chunk_id}:p0", "chunk_id": chunk_id, "doc_id": doc_id,
                      "ordinal": 0, "text": f"{text} proposition {i}", "passed": True,
                      "source": source, "run_id": run_id, "vector": vector})
    document = {"doc_id": doc_id, "source": source, "title": f"Benchmark document {doc_id}",
                "status": "indexed", "run_id": run_id, "content_sha256": f"sha-{run_id}",
                "embed_model": "all-MiniLM-L6-v2", "llm_model": "offline-rules"}
    return document, chunks, props


def _client(url: str, queries: list[str], seed: int, stop: threading.Event, load: Load) -> None:
    rng = np.random.default_rng(seed)
    client = Connection(url)
    try:
        while not stop.is_set():
            query = queries[int(rng.integers(0, len(queries)))]
            started = time.perf_counter()
            try:
                hits = client.post("/search", {"query": query, "k": K})
            except Exception as exc:  # every failure counts; the run goes on
                with load.lock:
                    load.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                client.close()  # a new connection for the next request
                client = Connection(url)
                continue
            elapsed = (time.perf_counter() - started) * 1000
            answered = time.time()
            bad = sum(UNCOMMITTED in (h["text"] or "") + (h["chunk_text"] or "") for h in hits)
            # The writer's rows carry the query vectors: its commits show in most answers.
            rounds = {int(m.group(1)) for h in hits
                      for text in (h["text"] or "", h["chunk_text"] or "")
                      if (m := WRITTEN.match(text))}
            with load.lock:
                load.latencies.append(elapsed)
                load.uncommitted += bad
                for round_ in rounds:
                    load.first_seen.setdefault(round_, answered)
    finally:
        client.close()


def _wait_for_first_commit(db: Path, folder: Path, ingest: subprocess.Popen,
                           timeout: float = 600) -> None:
    from propdex.store import Index

    index = Index.open(str(db), create=False)
    deadline = time.monotonic() + timeout
    while not any(d["source"].startswith(str(folder))
                  for d in index.live_documents().documents.values()):
        if ingest.poll() is not None or time.monotonic() > deadline:
            reason = ingest.stderr.read()[-2000:] if ingest.poll() is not None else "timed out"
            raise RuntimeError(f"the ingest committed nothing (exit {ingest.returncode}): "
                               f"{reason}")
        time.sleep(0.2)


def _ingest_folder(folder: Path, data: Sentences, documents: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(documents):
        sentences = [data.texts[(d * 30 + i) % len(data.texts)] for i in range(30)]
        (folder / f"note-{d:03d}.txt").write_text(
            f"Ingested note {d}\n\n" + "\n\n".join(" ".join(sentences[i:i + 5])
                                                   for i in range(0, len(sentences), 5)))
    return folder


def _run_for(seconds: float, stop: threading.Event, threads: list[threading.Thread]) -> float:
    """Start ``threads``, stop them after ``seconds``; the seconds they ran."""
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def _quiet_clients(url: str, queries: list[str], clients: int, seconds: float) -> dict:
    """The same clients with nothing committing: what the service gives on its own."""
    load, stop = Load(), threading.Event()
    elapsed = _run_for(seconds, stop, [threading.Thread(
        target=_client, args=(url, queries, i, stop, load)) for i in range(clients)])
    return {"requests": len(load.latencies) + len(load.errors), "errors": len(load.errors),
            "p50": percentile(load.latencies, 50), "p95": percentile(load.latencies, 95),
            "throughput": len(load.latencies) / elapsed, "seconds": elapsed}


def concurrency(db: Path, data: Sentences, queries: list[str], vectors: np.ndarray,
                clients: int, seconds: float, workdir: Path, workers: int,
                ingest_nice: int, writer_interval: float) -> dict:
    run = f"{workers}-{ingest_nice}-{writer_interval:g}"
    copy = workdir / f"concurrent-db-{run}"
    shutil.copytree(db, copy)
    folder = _ingest_folder(workdir / f"ingest-sources-{run}", data,
                            INGEST_DOCUMENTS)
    load = Load()
    spawn = multiprocessing.get_context("spawn")
    stop, commits = spawn.Event(), spawn.Queue()
    with service(copy, workdir / f"serve-concurrent-{workers}.log", workers) as (url, _, pid):
        # Each query once first: a new service embeds a query the first time it sees it
        # (ONNX Runtime, tens of milliseconds), which was a sixth of the quiet window's CPU
        # (py-spy); the window is the reference for a warm service.
        warm_http(url, queries, {})
        quiet_cpu = tree_cpu_seconds(pid)
        quiet = _quiet_clients(url, queries, clients, QUIET_SECONDS)
        quiet["service_cores"] = (tree_cpu_seconds(pid) - quiet_cpu) / quiet["seconds"]
        ingest = subprocess.Popen(
            [sys.executable, "-m", "propdex.cli", "ingest", str(folder), "--db", str(copy),
             "--llm", "offline", "--json", "--no-prune", "--nice", str(ingest_nice)],
            env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        # The clients start with the ingest's first commit (Prefect's start-up comes first).
        _wait_for_first_commit(copy, folder, ingest)
        writer = spawn.Process(target=_writer, args=(str(copy), vectors, stop, commits,
                                                     ingest_nice, writer_interval))
        writer.start()
        threads = [threading.Thread(target=_client, args=(url, queries, i, stop, load))
                   for i in range(clients)]
        window_start, cpu_start = time.time(), tree_cpu_seconds(pid)
        elapsed = _run_for(seconds, stop, threads)  # sets stop: the writer ends its round
        service_cores = (tree_cpu_seconds(pid) - cpu_start) / elapsed
        committed = _drained(commits, writer)
        # Its commits during the window are what counts: stop it and its worker processes
        # (a killed run leaves every document in its old or new version; this copy is
        # thrown away anyway).
        os.killpg(ingest.pid, signal.SIGTERM)
        try:
            ingest.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(ingest.pid, signal.SIGKILL)
            ingest.communicate()
    # The ingest's commits that landed while the clients were querying.
    from propdex.store import Index

    window = (window_start, window_start + elapsed)
    ingested = [row["ingested_at"].timestamp() for row in Index.open(str(copy)).documents()
                if row["source"].startswith(str(folder)) and row["ingested_at"] is not None]
    during = sum(window[0] <= t <= window[1] for t in ingested)
    # How long after its replacement began a writer round was first in an answer (an upper
    # bound: it includes writing the rows, and a round shows only to the queries its vectors
    # match, several times a second).
    lags = [(load.first_seen[r] - at) * 1000 for r, at in committed.items()
            if r in load.first_seen]
    return {"workers": workers, "ingest_nice": ingest_nice, "writer_interval": writer_interval,
            "quiet": quiet, "service_cores": service_cores,
            "requests": len(load.latencies) + len(load.errors), "errors": len(load.errors),
            "error_examples": load.errors[:3], "p50": percentile(load.latencies, 50),
            "p95": percentile(load.latencies, 95), "uncommitted": load.uncommitted,
            "writer_commits": len(committed), "seen": len(lags),
            "lag_p50": percentile(lags, 50), "lag_p95": percentile(lags, 95),
            "ingested": len(ingested), "ingested_during": during, "seconds": elapsed,
            "throughput": len(load.latencies) / elapsed}


def _drained(commits, writer) -> dict[int, float]:
    """The writer's (round -> commit time) once it has stopped."""
    rounds = {}
    while writer.is_alive() or not commits.empty():
        try:
            round_, at = commits.get(timeout=1)
        except queue.Empty:
            continue
        rounds[round_] = at
    writer.join()
    return rounds


# ------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument("--recall-queries", type=int, default=30,
                        help="queries of the recall measurement (exact search at 1M is slow)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                        help="the service's worker processes in the concurrency part, each "
                             "count in turn")
    parser.add_argument("--ingest-nice", type=int, nargs="+", default=[0],
                        help="`propdex ingest --nice` in the concurrency part (the writer runs "
                             "at the same niceness), each in turn")
    parser.add_argument("--writer-interval", type=float, nargs="+", default=[1.0],
                        help="seconds the writer waits after each committed replacement (0: "
                             "it commits flat out, a second heavy writer beside the ingest), "
                             "each in turn")
    parser.add_argument("--skip", nargs="*", default=[], choices=["warm", "cold", "concurrency"],
                        help="parts left out (warm: the warm HTTP, recall and cold parts)")
    add_corpus_argument(parser)
    args = parser.parse_args()
    use_corpus(args.corpus)
    data = load_sentences()
    queries = data.queries[:args.queries]
    workdir = Path(tempfile.mkdtemp(prefix="propdex-bench-serve-"))
    load_at_start = os.getloadavg()[0]
    from propdex.settings import Settings

    settings = Settings()
    embedder = (f"{settings.embed_model_name} on {settings.embed_runtime}"
                if settings.embedder == "minilm" else settings.embed_model_name)
    rows, cold, concurrent = [], {}, None
    try:
        for n in ([] if "warm" in args.skip else args.sizes):
            db = build(n, data)
            with service(db, workdir / f"serve-{n}.log") as (url, ready, pid):
                memory = _rss_mib(pid)
                http = {}
                for name, options in CONFIGS.items():
                    cpu_before = cpu_seconds(pid)
                    latencies = warm_http(url, queries, options)  # plus 5 warm-ups
                    http[name] = (latencies, (cpu_seconds(pid) - cpu_before) * 1000
                                  / (len(queries) + 5))
                if n == min(args.sizes) and "cold" not in args.skip:
                    cold = {"direct": cold_cli(db, queries, args.cold_runs),
                            "service": cold_cli(db, queries, args.cold_runs, url)}
            for name, options in CONFIGS.items():
                latencies, cpu_ms = http[name]
                recall, served_ms, exact_ms = recall_at_k(
                    db, queries[:args.recall_queries], options)
                rows.append((n, name, ready, memory, statistics.median(latencies),
                             percentile(latencies, 95), cpu_ms, recall, served_ms, exact_ms))
            print(f"  {n}: done", file=sys.stderr, flush=True)
        if "concurrency" not in args.skip:
            from propdex.api import IndexReader
            from propdex.settings import Settings

            embed = IndexReader(Settings(db=str(workdir / "unused"))).embedder
            vectors = np.asarray(embed.embed(queries), dtype=np.float32)
            concurrent = [concurrency(build(min(args.sizes), data), data, queries, vectors,
                                      args.clients, args.seconds, workdir, workers, nice,
                                      interval)
                          for interval in args.writer_interval
                          for nice in args.ingest_nice for workers in args.workers]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(rows, cold, concurrent, data, args, embedder, load_at_start)


def report(rows, cold, concurrent, data: Sentences, args, embedder: str, load: float) -> None:
    print(f"Vectors: {data.origin}; N propositions in N/100 documents (10 chunks of 10 "
          f"propositions each); queries: {args.queries} held-out sentences; embedder: "
          f"{embedder}; load average {load:.1f} at start (2 cores).\n")
    if cold:
        smallest = min(args.sizes)
        print(f"Cold `propdex search --json` at {smallest:,} propositions, a new process each "
              f"time ({args.cold_runs} runs):\n")
        print("| path | wall p50 s | wall min s | CPU p50 s (user + system) |")
        print("|---|---:|---:|---:|")
        for name, label in (("direct", "opens the index, embeds the query itself"),
                            ("service", "PROPDEX_SERVER_URL: asks the running service")):
            walls, cpus = cold[name]
            print(f"| {label} | {statistics.median(walls):.2f} | {min(walls):.2f} | "
                  f"{statistics.median(cpus):.2f} |")
        print()
    from propdex.search import DEFAULT_LEVEL, DEFAULT_MODE

    print(f"Warm service over HTTP (one client, sequential, {args.queries} queries, k=10; "
          f"default = level {DEFAULT_LEVEL}, mode {DEFAULT_MODE}), and recall@10 of the same "
          f"search against exact (flat) search through the same function "
          f"({args.recall_queries} queries):\n")
    print("| propositions | documents | search | service ready s | service RSS MiB | "
          "HTTP p50 ms | HTTP p95 ms | service CPU ms / request | recall@10 | "
          "in-process p50 ms | exact p50 ms |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, name, ready, memory, p50, p95, cpu_ms, recall, served_ms, exact_ms in rows:
        print(f"| {n:,} | {n // 100:,} | {name} | {ready:.1f} | {memory:,.0f} | "
              f"{p50:.1f} | {p95:.1f} | {cpu_ms:.1f} | {recall:.3f} | {served_ms:.1f} | "
              f"{exact_ms:.1f} |")
    if concurrent:
        print(f"\n{args.clients} concurrent clients at "
              f"{min(args.sizes):,} propositions: first {QUIET_SECONDS} s with nothing "
              f"committing, then for {args.seconds:.0f} s while `propdex ingest` (offline "
              f"LLM backend, its own session) commits documents and a writer process commits "
              f"replacements, each after appending an uncommitted version built from the "
              f"query vectors (the writer waits the interval after each commit, 0: flat out). "
              f"Lag = from the start of a writer's replacement to the first answer holding "
              f"it.\n")
        print("| workers | ingest nice | writer interval s | phase | requests | errors | "
              "p50 ms | p95 ms | "
              "requests/s | service cores | results from uncommitted runs | ingested / "
              "writer commits | lag p50 / p95 ms |")
        print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in concurrent:
            q = c["quiet"]
            print(f"| {c['workers']} | {c['ingest_nice']} | {c['writer_interval']:g} | "
                  f"nothing committing | "
                  f"{q['requests']} | {q['errors']} | {q['p50']:.0f} | {q['p95']:.0f} | "
                  f"{q['throughput']:.0f} | {q['service_cores']:.2f} | - | - | - |")
            print(f"| {c['workers']} | {c['ingest_nice']} | {c['writer_interval']:g} | "
                  f"during the commits | "
                  f"{c['requests']} | {c['errors']} | {c['p50']:.0f} | {c['p95']:.0f} | "
                  f"{c['throughput']:.0f} | {c['service_cores']:.2f} | {c['uncommitted']} | "
                  f"{c['ingested_during']} / {c['writer_commits']} | "
                  f"{c['lag_p50']:.0f} / {c['lag_p95']:.0f} |")
        for c in concurrent:
            for example in c["error_examples"]:
                print(f"\nerror ({c['workers']} workers): {example}")

if __name__ == "__main__":
    main()
