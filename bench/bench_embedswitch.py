"""Search latency while an index is re-embedded: a uniform index and a half-switched one,
two propdex checkouts side by side (rounds alternate which runs first).

    python bench/bench_embedswitch.py --base /work/wt/embedswitch-base [--sizes 100000]
                                      [--queries 60] [--rounds 4] [--corpus ../shared/corpus]
    python bench/bench_embedswitch.py --base ... --uniform-only --rounds 8
    python bench/bench_embedswitch.py --filters [--sizes 100000 1000000]

Indexes: bench/serve_indexes.py (N propositions in N/100 documents, all embedded with
"all-MiniLM-L6-v2"), and two copies of it whose first half of documents (documents, chunks
and propositions rows) records "multilingual-e5-small-q4" instead, optimized again: what an
ingest that switched back to MiniLM leaves when it has re-embedded half the documents; one
with the embed_model bitmap index optimize() builds, one without (the first ingest after
the upgrade builds it only when it ends).

Per round and checkout, one process (PYTHONPATH = the checkout) opens the index with
open_index (the default embedder, int8 MiniLM, is the query's model), warms up on 5
queries, then times each held-out query's IndexReader.search (k=10, the query vector given,
so no embedding is timed) for: the default search (both, hybrid), a vector search of
propositions, and a full-text search of both. A refused search is counted as refused.

--filters: the prefilter alone, on the half-switched index's propositions (LanceDB, the
IVF_FLAT index and propdex's probes): no filter, ``passed = true AND doc_id IN (<the
re-embedded half>)`` (what propdex sends), and ``passed = true AND embed_model IN (...)``
(a column filter on the model, no scalar index on it), and ``NOT doc_id IN (<the other
half>)``, median ms per query, the filters alternated query by query.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
E5 = "multilingual-e5-small-q4"
SEARCHES = {"default (both, hybrid)": ("both", "hybrid"),
            "propositions, vector": ("propositions", "vector"),
            "both, fts": ("both", "fts")}


def half_switched(db: Path, bitmap: bool) -> Path:
    """A copy of ``db`` whose first half of documents records E5 as their embedder, optimized
    (by this checkout: its embed_model bitmap index built), and without that index unless
    ``bitmap``: an index re-embedded by the first ingest after the upgrade, which builds the
    index only when it ends."""
    copy = db.parent.parent / (db.parent.name + ("-half-e5-bitmap" if bitmap else "-half-e5-v2")) / "db"
    if (copy.parent / "done").is_file():
        return copy
    shutil.rmtree(copy.parent, ignore_errors=True)
    shutil.copytree(db, copy)
    import lancedb

    from propdex.store import Index

    connection = lancedb.connect(str(copy))
    n_docs = connection.open_table("documents").count_rows()
    where = f"doc_id < 'doc-{n_docs // 2:05d}'"
    for name in ("documents", "chunks", "propositions"):
        connection.open_table(name).update(where=where, values={"embed_model": E5})
    Index.open(str(copy), create=False).optimize()
    for name in ("chunks", "propositions"):
        table = connection.open_table(name)
        for index in table.list_indices():
            if index.columns == ["embed_model"] and not bitmap:
                table.drop_index(index.name)
    (copy.parent / "done").write_text(where)
    return copy


def queries_file(data, count: int) -> Path:
    import numpy as np

    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"embedswitch-queries-{count}.npz"
    np.savez(path, queries=np.array(data.queries[:count], dtype=object),
             vectors=data.query_vectors[:count])
    return path


def measure(code: str, db: str, queries: str) -> dict:
    """In this process, with propdex imported from ``code``: per search, median ms."""
    sys.path.insert(0, code)
    import numpy as np

    import propdex
    from propdex.api import open_index
    from propdex.errors import EmbedderMismatchError

    assert propdex.__file__.startswith(code), propdex.__file__
    loaded = np.load(queries, allow_pickle=True)
    texts, vectors = list(loaded["queries"]), loaded["vectors"]
    reader = open_index(db)
    out = {}
    for name, (level, mode) in SEARCHES.items():
        def run(i: int, level=level, mode=mode):
            return reader.search(texts[i], level=level, mode=mode, k=10,
                                 query_vector=lambda i=i: vectors[i])

        try:
            for i in range(5):
                run(i)
        except EmbedderMismatchError:
            out[name] = "refused"
            continue
        times = []
        for i in range(len(texts)):
            started = time.perf_counter()
            run(i)
            times.append((time.perf_counter() - started) * 1000)
        out[name] = round(statistics.median(times), 2)
    return out


def compare(base: str, indexes: dict[str, Path], queries: Path, rounds: int) -> None:
    checkouts = {"base": base, "branch": str(REPO)}
    medians: dict[tuple[str, str, str], list] = {}
    for round_ in range(rounds):
        order = list(checkouts) if round_ % 2 == 0 else list(reversed(checkouts))
        for label, db in indexes.items():
            for who in order:
                answer = subprocess.run(
                    [sys.executable, __file__, "--measure", checkouts[who], str(db), str(queries)],
                    capture_output=True, text=True, check=True, env={**os.environ,
                                                                     "PYTHONPATH": checkouts[who]})
                result = json.loads(answer.stdout.strip().splitlines()[-1])
                print(f"round {round_ + 1} {label} {who}: {result} (load {os.getloadavg()[0]:.2f})",
                      flush=True)
                for search, value in result.items():
                    medians.setdefault((label, search, who), []).append(value)
    print("\n| index | search | base median ms | branch median ms | branch / base |")
    print("|---|---|---|---|---|")
    for label in indexes:
        for search in SEARCHES:
            values = {who: medians[(label, search, who)] for who in checkouts}
            cells = {who: "refused" if "refused" in v else statistics.median(v)
                     for who, v in values.items()}
            ratio = (f"{cells['branch'] / cells['base']:.2f}"
                     if not isinstance(cells["base"], str) and not isinstance(cells["branch"], str)
                     else "-")
            shown = {who: c if isinstance(c, str) else f"{c:.2f} ({', '.join(map(str, values[who]))})"
                     for who, c in cells.items()}
            print(f"| {label} | {search} | {shown['base']} | {shown['branch']} | {ratio} |")


def filters(db: Path, queries: Path, repeat: int = 3) -> None:
    import lancedb
    import numpy as np

    from propdex.store import predicates as p
    from propdex.store.maintenance import probes_of_indices

    vectors = np.load(queries, allow_pickle=True)["vectors"]
    connection = lancedb.connect(str(db))
    props = connection.open_table("propositions")
    probes = probes_of_indices(props.list_indices())
    n_docs = connection.open_table("documents").count_rows()
    searched = [f"doc-{d:05d}" for d in range(n_docs // 2, n_docs)]
    wheres = {
        "none": None,
        "doc_id IN (re-embedded half)": p.all_of("passed = true", p.in_list("doc_id", searched)),
        "NOT doc_id IN (the other half)": p.all_of(
            "passed = true", "NOT (" + p.in_list("doc_id", sorted(
                set(f"doc-{d:05d}" for d in range(n_docs)) - set(searched))) + ")"),
        "embed_model IN (MiniLM names)": p.all_of(
            "passed = true", p.in_list("embed_model", ["all-MiniLM-L6-v2",
                                                       "all-MiniLM-L6-v2-int8"])),
    }
    times: dict[str, list[float]] = {name: [] for name in wheres}
    for _ in range(repeat):
        for vector in vectors:
            for name, where in wheres.items():  # alternated query by query
                query = props.search(vector, vector_column_name="vector").distance_type("cosine")
                query = query.nprobes(probes) if probes else query
                if where is not None:
                    query = query.where(where, prefilter=True)
                started = time.perf_counter()
                query.limit(50).select(["prop_id", "doc_id", "run_id", "_distance"]).to_arrow()
                times[name].append((time.perf_counter() - started) * 1000)
    n = props.count_rows()
    for name, values in times.items():
        print(f"{n} propositions, where {name}: median {statistics.median(values):.2f} ms "
              f"over {len(values)} queries", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--measure":
        print(json.dumps(measure(*sys.argv[2:5])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the checkout to compare with (a git worktree)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--filters", action="store_true")
    parser.add_argument("--uniform-only", action="store_true",
                        help="compare on the uniform index alone (more rounds in the time)")
    sys.path.insert(0, str(REPO / "bench"))
    from serve_indexes import add_corpus_argument, build, load_sentences, use_corpus

    add_corpus_argument(parser)
    args = parser.parse_args()
    use_corpus(args.corpus)
    data = load_sentences()
    if data.query_vectors is None:
        sys.exit("bench_embedswitch needs the corpus's MiniLM query vectors (--corpus)")
    queries = queries_file(data, args.queries)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for n in args.sizes:
        uniform = build(n, data)
        halves = {f"{n} half-switched, bitmap": half_switched(uniform, bitmap=True),
                  f"{n} half-switched, no bitmap": half_switched(uniform, bitmap=False)}
        if args.filters:
            for label, half in halves.items():
                print(label, flush=True)
                filters(half, queries)
        else:
            compare(args.base, {f"{n} uniform": uniform, **({} if args.uniform_only else halves)},
                    queries, args.rounds)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
