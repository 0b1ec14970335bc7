"""The propdex command line.

`ingest` runs the Prefect flow; `search`, `status` and `verify` read LanceDB directly and
never import Prefect (its import and ephemeral server cost 15-25 s on small machines).

Exit codes: 0 success (or nothing to do); 1 some documents failed; 2 usage error;
3 the run was stopped by an LLM configuration error (bad key, unknown model);
4 storage error; 5 verify found the index inconsistent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from propdex.errors import PropdexError, StorageError

EXIT_OK, EXIT_FAILED_DOCS, EXIT_USAGE, EXIT_STOPPED, EXIT_STORAGE, EXIT_INCONSISTENT = 0, 1, 2, 3, 4, 5


def _prefect_environment() -> None:
    """Embedded defaults for Prefect, set before it is imported."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _settings(args: argparse.Namespace, **extra):
    from propdex.settings import Settings

    values = {k: v for k, v in extra.items() if v is not None}
    if getattr(args, "db", None):
        values["db"] = args.db
    return Settings(**values)


def cmd_ingest(args: argparse.Namespace) -> int:
    _prefect_environment()
    from flows.ingest import ingest
    from flows.parameters import IngestOptions

    options = IngestOptions(
        llm=args.llm, llm_model=args.llm_model, chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
    )
    settings = options.settings(args.db or _settings(args).db)
    state = ingest(
        sources=args.paths, db=settings.db, options=options,
        prune_removed=not args.no_prune, force=args.force, return_state=True,
    )
    summary = state.result(raise_on_failure=False)
    if isinstance(summary, BaseException):
        print(f"propdex: ingest failed: {summary}", file=sys.stderr)
        return EXIT_STORAGE if isinstance(summary, StorageError) else EXIT_FAILED_DOCS
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        from propdex.pipeline.outcome import DocumentOutcome, RunSummary
        from propdex.pipeline.report import render_markdown

        data = dict(summary)
        docs = [DocumentOutcome(**d) for d in data["documents"]]
        fields = {k: data[k] for k in ("run_id", "db", "llm", "unchanged", "removed", "missing",
                                       "swept_rows", "seconds", "stopped")}
        print(render_markdown(RunSummary(documents=docs, **fields)))
    failed = [d for d in summary["documents"] if d["status"] != "indexed"]
    for doc in failed:
        print(f"propdex: {doc['source']}: {doc['status']}: {doc['error']}", file=sys.stderr)
    for missing in summary["missing"]:
        print(f"propdex: {missing}: no such file, folder or matching glob", file=sys.stderr)
    if summary.get("stopped"):
        print(f"propdex: run stopped: {summary['stopped']}", file=sys.stderr)
        return EXIT_STOPPED
    return EXIT_FAILED_DOCS if failed or summary["missing"] else EXIT_OK


def cmd_search(args: argparse.Namespace) -> int:
    from propdex.runtime import embedder_for
    from propdex.search import search
    from propdex.store import Index

    settings = _settings(args)
    index = Index.open(settings.db_uri, create=False)
    vector = None if args.mode == "fts" else embedder_for(settings).embed_query(args.query)
    results = search(
        index, args.query, vector, level=args.level, mode=args.mode, k=args.k,
        doc_ids=args.doc or None, source_glob=args.source,
    )
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2, default=str, ensure_ascii=False))
        return EXIT_OK
    if not results:
        print("no results")
    for rank, result in enumerate(results, 1):
        r = result.to_dict()
        pages = f"p. {r['page_start']}" + (f"-{r['page_end']}" if r["page_end"] != r["page_start"] else "")
        print(f"[{rank}] {r['score']:.3f}  {r['title']} ({pages}) — {r['source']}")
        print(f"    {r['text']}")
        if r["level"] == "proposition":
            print(f"    from: {r['chunk_text'][:300].replace(chr(10), ' ')}...")
    return EXIT_OK


STATUS_FIELDS = ("source", "status", "error", "chunk_count", "proposition_count", "passed_count",
                 "content_sha256", "title", "ingested_at", "last_attempt_at", "run_id",
                 "last_run_id", "doc_id", "page_count", "llm_model", "embed_model",
                 "prompt_tokens", "completion_tokens", "llm_calls")


def cmd_status(args: argparse.Namespace) -> int:
    from propdex.store import Index

    rows = Index.open(_settings(args).db_uri, create=False).documents()
    rows = [{k: row.get(k) for k in STATUS_FIELDS} for row in rows]
    if args.json:
        print(json.dumps(rows, indent=2, default=str, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print("the index is empty")
    for row in rows:
        error = f"  ({row['error']})" if row["error"] else ""
        print(f"{row['status']:8} {row['chunk_count'] or 0:5} chunks {row['proposition_count'] or 0:6} "
              f"propositions  {row['source']}{error}")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from propdex.store import Index

    problems = Index.open(_settings(args).db_uri, create=False).verify()
    for problem in problems:
        print(problem)
    if problems:
        print(f"propdex: {len(problems)} problem(s) found", file=sys.stderr)
        return EXIT_INCONSISTENT
    print("index consistent")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="propdex", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def with_db(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument("--db", help="database folder or URI (default ./propdex-db or PROPDEX_DB)")
        return sub

    ingest = with_db(commands.add_parser("ingest", help="ingest files, folders and globs"))
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--llm", choices=["offline", "openai"])
    ingest.add_argument("--llm-model")
    ingest.add_argument("--chunk-size", type=int)
    ingest.add_argument("--chunk-overlap", type=int)
    ingest.add_argument("--no-prune", action="store_true",
                        help="keep documents whose files left the given folders")
    ingest.add_argument("--force", action="store_true", help="re-process unchanged documents")
    ingest.add_argument("--json", action="store_true", help="print the run summary as JSON")
    ingest.set_defaults(func=cmd_ingest)

    search = with_db(commands.add_parser("search", help="search the index"))
    search.add_argument("query")
    search.add_argument("--level", choices=["propositions", "chunks", "both"], default="propositions")
    search.add_argument("--mode", choices=["vector", "fts", "hybrid"], default="vector")
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--doc", action="append", help="restrict to a doc_id (repeatable)")
    search.add_argument("--source", help="restrict to sources matching this glob")
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=cmd_search)

    status = with_db(commands.add_parser("status", help="each document's state"))
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    verify = with_db(commands.add_parser("verify", help="check the tables against each other"))
    verify.set_defaults(func=cmd_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StorageError as exc:
        print(f"propdex: {exc}", file=sys.stderr)
        return EXIT_STORAGE
    except PropdexError as exc:
        print(f"propdex: {exc}", file=sys.stderr)
        return EXIT_FAILED_DOCS
    except ValueError as exc:  # invalid settings from the environment or flags
        print(f"propdex: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
