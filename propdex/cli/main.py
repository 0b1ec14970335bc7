"""The propdex command line.

`ingest` and `eval` run Prefect flows; `search`, `status` and `verify` read the index directly and
never import Prefect (its import and ephemeral server take seconds). The exit codes are
EXAMPLES_AND_EXIT_CODES's, which `propdex --help` prints.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import NoReturn

from propdex.cli import interrupts
from propdex.cli.interrupts import CtrlC
from propdex.errors import IndexNotFoundError, PropdexError, SearchRequestError, StorageError
from propdex.metadata import MAX_FILTER_ENTRIES, MetadataError, parse_pairs
from propdex.sources import SUPPORTED_SUFFIXES

EXIT_OK, EXIT_FAILED_DOCS, EXIT_USAGE, EXIT_STOPPED, EXIT_STORAGE, EXIT_INCONSISTENT = 0, 1, 2, 3, 4, 5

DESCRIPTION = ("Index PDFs, books, text and Markdown files as contextual chunks and LLM-written "
               "propositions in LanceDB, and search them with citations. Without an LLM "
               "server (PROPDEX_LLM_BASE_URL, PROPDEX_LLM_API_KEY) a rule-based offline "
               "backend runs; every setting is a PROPDEX_* variable.")
# tests/test_docs_examples.py parses these examples with this parser.
EXAMPLES_AND_EXIT_CODES = """\
examples:
  propdex ingest examples                        index a folder into ./propdex-db
  propdex search "How are propositions graded?"  the best hits, with their citations
  propdex status                                 each document's state
  propdex serve --db propdex-db                  HTTP on 127.0.0.1:8765 (API docs at /docs)

`propdex COMMAND --help` explains a command's flags.

exit codes:
  0    success, or nothing to do
  1    some documents failed (each is printed with its reason), or a path names nothing
  2    usage error, a path refused by PROPDEX_ALLOWED_ROOTS, or no index at --db
  3    an LLM configuration error (bad key, unknown model) or an unreachable LLM or
       embeddings server stopped the run
  4    storage error (a read-only or full database, a damaged table)
  5    `propdex verify` found the tables disagreeing
  130  interrupted (Ctrl-C)
"""


def _prefect_environment() -> None:
    """Embedded defaults for Prefect, set before it is imported."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Prefect's client-side telemetry too: on a terminal it prints a notice over the progress
    # display at first import, and propdex makes no network calls it was not asked for.
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _settings(args: argparse.Namespace, **extra):
    from propdex.settings import Settings

    values = {k: v for k, v in extra.items() if v is not None}
    if getattr(args, "db", None):
        values["db"] = args.db
    if getattr(args, "workers", None) is not None:
        values["serve_workers"] = args.workers
    return Settings(**values)


def _open_index(args: argparse.Namespace):
    from propdex.store import Index

    settings = _settings(args)
    return Index.open(settings.db_uri, create=False, storage_options=settings.storage_options)


def _missing_index(db_uri: str) -> IndexNotFoundError | None:
    """The error for a local database folder that does not exist: a mistyped --db or
    PROPDEX_DB, which a read command would otherwise answer with an empty index. (Not
    propdex.store.datasets.index_folder_missing: `propdex search` forks its embedding child
    before importing PyArrow.)"""
    if "://" in db_uri or os.path.exists(db_uri):
        return None
    return IndexNotFoundError(f"no index at {db_uri}: check --db (or PROPDEX_DB), or run "
                              "`propdex ingest` first")


def _no_index_at(db_uri: str) -> bool:
    """Whether the local database folder does not exist (_missing_index); says so on stderr."""
    missing = _missing_index(db_uri)
    if missing is not None:
        print(f"propdex: {missing}", file=sys.stderr)
    return missing is not None


class _ExpectedFailureFilter(logging.Filter):
    """Drop the traceback Prefect logs with a task failure propdex raised on purpose (bad
    input, timeout, LLM fault): the run report states its reason; tracebacks stay for bugs.
    Drop too the ERROR line of each later stage of the document, which never ran
    (NotReady: an upstream task failed): the failed stage's own line names the cause."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PropdexError):
            record.exc_info, record.exc_text = None, None
        return not record.getMessage().startswith("Finished in state NotReady(")


def ingest_options(args: argparse.Namespace):
    """The flow parameters the ingest flags give; a flag left out stays empty, so the
    PROPDEX_* variable or the default applies."""
    from flows.parameters import IngestOptions  # pydantic only: no Prefect import

    return IngestOptions(
        llm=args.llm, llm_model=args.llm_model, chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap, chunker=args.chunker, sectioning=args.sectioning,
        metadata=parse_pairs(args.meta or [], "--meta") or None,
        pdf_reader=args.pdf_reader, document_concurrency=args.document_concurrency,
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    """Plan first, without Prefect: an unchanged corpus is reported at once, without starting
    Prefect or a flow run. Anything to do runs the ingest flow, with Prefect's API started
    (and the embedding model loaded) while the flow's modules import."""
    nice = args.nice if args.nice is not None else _settings(args).ingest_nice
    if nice:
        from propdex.cli.priority import run_at_lower_priority

        status = run_at_lower_priority(nice)  # first: it forks, and no thread may run yet
        if status is not None:
            return status  # the parent, once the ingest (its child) ended
    from propdex.cli import progress
    from propdex.pipeline.plan import needs_run, plan_sources, unchanged_run_summary

    started = time.perf_counter()
    _prefect_environment()
    try:
        options = ingest_options(args)
    except MetadataError as exc:
        print(f"propdex: {exc}", file=sys.stderr)
        return EXIT_USAGE
    settings = options.settings(args.db or _settings(args).db)
    dask = bool(args.dask or settings.dask_address)
    plan = None
    # No database folder yet (a first run) or --force: a flow run is certain, so Prefect's
    # API starts before planning rather than after it. Unless no path names anything (a
    # mistyped folder): planning says so at once, without starting Prefect.
    new_db = "://" not in settings.db_uri and not os.path.exists(settings.db_uri)
    certain = (args.force or new_db) and _names_anything(args.paths)
    api = _early_api(dask) if certain else None
    if not certain:
        plan = plan_sources(args.paths, settings, force=False, prune=not args.no_prune,
                            metadata=options.document_metadata())
        if not needs_run(plan, settings):
            summary = unchanged_run_summary(plan, settings, time.perf_counter() - started)
            return _report_ingest(summary.to_dict(), args)
        api = _early_api(dask)
    # The model is loaded where documents embed: here, unless Dask workers do it.
    warm_up = not dask and (plan is None or bool(plan.to_process))
    if warm_up:
        from propdex.extract.isolated import for_documents, start_extractions, start_workers
        from propdex.remote import is_remote

        pdfs = _pdfs_to_read(args.paths, plan, settings.allowed_roots)
        start_workers(settings, sys.maxsize if pdfs is None else len(pdfs))
        # Read while Prefect's API starts (--force too: its extract tasks miss Prefect's
        # cache and claim these). Objects of a store are read from their downloaded copies:
        # left to their tasks.
        if pdfs and not any(map(is_remote, pdfs)):
            start_extractions(pdfs, for_documents(settings, len(pdfs)))
    with progress.shown(progress.wanted(args.json)):
        progress.phase("starting Prefect")
        try:
            state = _run_ingest_flow(args, options, settings, api, warm_up=warm_up)
        finally:
            if warm_up:
                from propdex.extract.isolated import drop_early_extractions

                drop_early_extractions()
    summary = state.result(raise_on_failure=False)
    if isinstance(summary, BaseException):
        print(f"propdex: ingest failed: {summary}", file=sys.stderr)
        return EXIT_STORAGE if isinstance(summary, StorageError) else EXIT_FAILED_DOCS
    return _report_ingest(summary, args)


def _names_anything(paths: list[str]) -> bool:
    """Whether any path may yield a source: an object-store prefix, a path that exists, or a
    glob that matches something."""
    import glob

    from propdex.remote import is_remote

    def named(path: str) -> bool:
        expanded = os.path.expanduser(path)
        return is_remote(path) or os.path.lexists(expanded) or bool(glob.glob(expanded, recursive=True))

    return any(map(named, paths))


def _pdfs_to_read(paths: list[str], plan, allowed_roots: list[str]) -> list[str] | None:
    """The PDFs (or other formats PyMuPDF reads) the run may extract, in the order the flow
    takes them: the planned ones but retries, or, before planning, those the paths name or
    hold (folders walked, globs expanded), so that a run of Markdown and text files starts
    no extraction worker. None when object-store prefixes are among the paths: their
    objects are listed only when the flow plans."""
    from propdex.extract import PYMUPDF_SUFFIXES
    from propdex.remote import is_remote
    from propdex.sources import discover

    if plan is not None:
        # A retry's extraction comes from Prefect's task cache (redo_stages): read early, it
        # would be read for nothing.
        sources = [item.source for item in plan.to_process if item.reason != "retry"]
    elif any(is_remote(path) for path in paths):
        return None
    else:
        sources = discover(paths, allowed_roots).files
    return [source for source in sources if source.lower().endswith(PYMUPDF_SUFFIXES)]


def _early_api(dask: bool):
    """Prefect's ephemeral API, starting now; None with Dask, whose local workers are handed
    the API Prefect starts itself (flows.runners.prefect_api_for_workers)."""
    from propdex.prefect_runtime.api import start_ephemeral_api

    return None if dask else start_ephemeral_api()


def _run_ingest_flow(args: argparse.Namespace, options, settings, api, *, warm_up: bool):
    """The ingest flow's final state. The embedding model loads in a thread meanwhile; the
    flow starts once it has loaded (two threads loading one model would load it twice)."""
    from propdex.prefect_runtime.api import using_api
    from propdex.runtime import warm_up_embedder

    loader = threading.Thread(target=warm_up_embedder, args=(settings,), daemon=True)
    if warm_up:
        loader.start()
        # LanceDB takes about a second of CPU to import, which the first commit would pay
        # while other documents are being read; here it overlaps Prefect's start-up.
        threading.Thread(target=importlib.import_module, args=("lancedb",), daemon=True).start()
    from flows.ingest import ingest

    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _ExpectedFailureFilter) for f in logger.filters):
            logger.addFilter(_ExpectedFailureFilter())
    if args.dask or not settings.dask_address:
        from flows.runners import task_runner_for

        # Threads sized for this run's documents at once, or the Dask cluster --dask names
        # (PROPDEX_DASK_ADDRESS alone: the flow's own runner, made when it was imported).
        runner = task_runner_for(settings.model_copy(update={"dask_address": args.dask}))
        ingest = ingest.with_options(task_runner=runner)
    with using_api(api):  # waits for the API: a server that cannot start is reported now
        if warm_up:
            loader.join()
        return ingest(
            sources=args.paths, db=settings.db, options=options,
            prune_removed=not args.no_prune, force=args.force, return_state=True,
        )


def _report_ingest(summary: dict, args: argparse.Namespace) -> int:
    """Print a run summary (JSON or the Markdown report) and the problems; the exit code."""
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        from propdex.pipeline.outcome import DocumentOutcome, RunSummary
        from propdex.pipeline.report import render_markdown

        data = dict(summary)
        docs = [DocumentOutcome(**d) for d in data["documents"]]
        fields = {k: data[k] for k in ("run_id", "db", "llm", "unchanged", "removed", "missing",
                                       "swept_rows", "seconds", "stopped", "refused")}
        fields["metadata_updated"] = data.get("metadata_updated", [])
        print(render_markdown(RunSummary(documents=docs, **fields)))
    failed = [d for d in summary["documents"] if d["status"] != "indexed"]
    for doc in failed:
        print(f"propdex: {doc['source']}: {doc['status']}: {doc['error']}", file=sys.stderr)
    for missing in summary["missing"]:
        print(f"propdex: {missing}: no such file, folder or matching glob", file=sys.stderr)
    for path, reason in summary.get("refused", []):
        print(f"propdex: {path}: {reason}", file=sys.stderr)
    if summary.get("stopped"):
        print(f"propdex: run stopped: {summary['stopped']}", file=sys.stderr)
        return EXIT_STOPPED
    if summary.get("refused"):
        return EXIT_USAGE  # paths outside PROPDEX_ALLOWED_ROOTS: nothing under them was read
    return EXIT_FAILED_DOCS if failed or summary["missing"] else EXIT_OK


def _search_results(args: argparse.Namespace) -> list[dict]:
    """The results of `propdex search`, from the service at PROPDEX_SERVER_URL or the index."""
    settings = _settings(args)
    # Options left out take the defaults of propdex.search (here or in the service).
    where = parse_pairs(args.where or [], "--where", limit=MAX_FILTER_ENTRIES) or None
    options = {"level": args.level, "mode": args.mode, "k": args.k,
               "doc_ids": args.doc or None, "source": args.source, "where": where}
    options = {k: v for k, v in options.items() if v is not None}
    if settings.server_url and not args.db:  # --db names an index: open that one
        from propdex.service.client import ServiceUnavailableError, search_via_service

        token = settings.api_token.get_secret_value() if settings.api_token else None
        try:
            return search_via_service(settings.server_url, {"query": args.query, **options},
                                      token)
        except ServiceUnavailableError as exc:
            print(f"propdex: {exc}; searching the index directly", file=sys.stderr)
    if (missing := _missing_index(settings.db_uri)) is not None:
        raise missing
    vector = None
    if options.get("mode") != "fts":
        # Forked before LanceDB is imported: the query is embedded on the other core
        # while this process imports and opens the index (propdex.embed.query).
        from propdex.embed.query import embed_query_in_child

        vector = embed_query_in_child(settings, args.query)
    from propdex.api import IndexReader

    # The reader logs what a search left out of its vector rankings for long-running
    # readers; here cmd_search prints it, once, also for results from a service.
    logger = logging.getLogger("propdex.search")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    try:
        return [r.to_dict() for r in IndexReader(settings).search(
            args.query, query_vector=vector, **options)]
    finally:
        if vector is not None:
            vector()  # the child is waited for even when the search needed no vector


def cmd_search(args: argparse.Namespace) -> int:
    try:
        results = _search_results(args)
    except (PropdexError, ValueError) as exc:
        # A program reading --json's output gets JSON on every path; the message also goes
        # to stderr, and the exit code tells the failure kind (exit_code).
        if args.json:
            print(json.dumps({"error": str(exc)}, ensure_ascii=False))
        raise
    if results and (left_out := results[0].get("vector_left_out")):
        print(f"propdex: warning: {left_out['warning']}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2, default=str, ensure_ascii=False))
        return EXIT_OK
    if not results:
        print("no results")
    for rank, r in enumerate(results, 1):
        pages = f"p. {r['page_start']}" + (f"-{r['page_end']}" if r["page_end"] != r["page_start"] else "")
        print(f"[{rank}] {r['score']:.3f}  {r['title']} ({pages}) — {r['source']}")
        print(f"    {r['text']}")
        if r["level"] == "proposition":
            print(f"    from: {r['chunk_text'][:300].replace(chr(10), ' ')}...")
    return EXIT_OK


STATUS_FIELDS = ("source", "status", "error", "chunk_count", "proposition_count", "passed_count",
                 "content_sha256", "title", "ingested_at", "last_attempt_at", "run_id",
                 "last_run_id", "doc_id", "page_count", "llm_model", "embed_model",
                 "prompt_tokens", "completion_tokens", "llm_calls", "context_fallback",
                 "ungraded_count", "embed_truncated", "encoding", "furniture_removed",
                 "pdf_reader", "layout_fallback_pages",
                 "checks_rejected")


def describe_rejections(counts: dict[str, int]) -> str:
    """"propositions: ungrounded 3, title: placeholder 1" from {"step: reason": count}."""
    return ", ".join(f"{key} {count}" for key, count in sorted(counts.items()))


def cmd_status(args: argparse.Namespace) -> int:
    if _no_index_at(_settings(args).db_uri):
        return EXIT_USAGE
    rows = _open_index(args).documents()
    rows = [{k: row.get(k) for k in STATUS_FIELDS} for row in rows]
    if args.json:
        print(json.dumps(rows, indent=2, default=str, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print("the index is empty")
    for row in rows:
        error = f"  ({row['error']})" if row["error"] else ""
        if row["context_fallback"]:
            error += f"  [fallback: {row['context_fallback']}]"
        if row["ungraded_count"]:
            error += f"  [{row['ungraded_count']} ungraded]"
        if row["layout_fallback_pages"]:
            pages = ", ".join(map(str, row["layout_fallback_pages"]))
            error += f"  [layout engine failed on page(s) {pages}: read in fast mode]"
        rejected = json.loads(row["checks_rejected"] or "{}")
        if rejected:
            error += f"  [rejected by the checks: {describe_rejections(rejected)}]"
        attempted = str(row["last_attempt_at"] or row["ingested_at"] or "")[:19]
        print(f"{row['status']:8} {row['chunk_count'] or 0:5} chunks {row['proposition_count'] or 0:6} "
              f"propositions  sha256 {(row['content_sha256'] or '')[:12]}  last run "
              f"{row['last_run_id'] or row['run_id']} at {attempted}  {row['source']}{error}")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    if _no_index_at(_settings(args).db_uri):
        return EXIT_USAGE
    found = _open_index(args).check()
    for problem in found.problems:
        print(problem)
    for leftovers in found.leftovers:
        print(f"leftover: {leftovers.describe()}")
    if found.problems:
        print(f"propdex: {len(found.problems)} problem(s) found", file=sys.stderr)
        return EXIT_INCONSISTENT
    # Leftovers alone exit 0: no read sees them and the next ingest removes them, so the
    # index answers soundly and there is nothing for the user to repair.
    print("index consistent" + (f" ({len(found.leftovers)} interrupted run(s) left rows the "
                                "next ingest removes)" if found.leftovers else ""))
    return EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    from flows.parameters import EvaluateOptions
    from propdex.errors import LLMConfigurationError
    from propdex.evaluation import load_questions
    from propdex.evaluation.errors import EvaluationError
    from propdex.evaluation.report import render_markdown
    from propdex.evaluation.run import prepare

    options = EvaluateOptions(ks=args.k, budgets=args.words, top_k=args.top,
                              answer_quality=args.answers, llm_model=args.llm_model)
    db = _settings(args).db
    try:
        # A bad questions file or a missing extra is reported now, not after Prefect starts.
        load_questions(args.questions)
        prepare(db, options.ks, options.budgets, answer_quality=options.answer_quality,
                settings=options.settings(db))
    except EvaluationError as exc:
        print(f"propdex: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _prefect_environment()
    from flows.evaluate import evaluate

    state = evaluate(questions=os.path.abspath(args.questions), db=db, out=args.out,
                     options=options, return_state=True)
    report = state.result(raise_on_failure=False)
    if isinstance(report, BaseException):
        print(f"propdex: eval failed: {report}", file=sys.stderr)
        if isinstance(report, LLMConfigurationError):
            return EXIT_STOPPED
        return EXIT_STORAGE if isinstance(report, StorageError) else EXIT_FAILED_DOCS
    if args.json:
        print(json.dumps(report, indent=2, default=str, ensure_ascii=False))
    else:
        print(render_markdown(report))
        print("written: " + ", ".join(report["files"].values()))
    return EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    _prefect_environment()
    from propdex.watch import run_watch

    try:
        return run_watch(args.folder, db=args.db, debounce_ms=args.debounce_ms)
    except (PropdexError, NotADirectoryError) as exc:  # no server, no watchfiles, not a folder
        print(f"propdex: {exc}", file=sys.stderr)
        return EXIT_USAGE


def cmd_serve(args: argparse.Namespace) -> int:
    from propdex.service.run import UnsafeBindError, serve

    settings = _settings(args)
    try:
        return serve(settings, args.host or settings.serve_host,
                     settings.serve_port if args.port is None else args.port)
    except UnsafeBindError as exc:
        print(f"propdex: {exc}", file=sys.stderr)
        return EXIT_USAGE


def cmd_mcp(args: argparse.Namespace) -> int:
    from propdex.api import IndexReader
    from propdex.service.mcp_tools import McpUnavailableError, run_mcp

    settings = _settings(args)
    try:
        run_mcp(IndexReader(settings))
    except McpUnavailableError as exc:
        print(f"propdex: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


class CommandLineParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors (``-k abc``, an unknown flag) also reach a program
    reading a ``--json`` command's output: it gets ``{"error": ...}`` on stdout, as from every
    other failure of such a command, besides argparse's usage message on stderr and exit 2."""

    json_errors = False

    def parse_known_args(self, args=None, namespace=None):
        # Each subcommand's parser sees the arguments after its name, so it knows on its own
        # whether its command was given --json.
        self.json_errors = "--json" in (sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            print(json.dumps({"error": message}, ensure_ascii=False))
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandLineParser(prog="propdex", description=DESCRIPTION,
                               epilog=EXAMPLES_AND_EXIT_CODES,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    def with_db(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument("--db", help="database folder or URI (default ./propdex-db or PROPDEX_DB)")
        return sub

    ingest = with_db(commands.add_parser("ingest", help="ingest files, folders and globs"))
    ingest.add_argument("paths", nargs="+", metavar="PATH",
                        help=f"files, folders (walked for {', '.join(SUPPORTED_SUFFIXES)}) and globs")
    ingest.add_argument("--llm", choices=["offline", "openai"],
                        help="LLM backend (default openai when PROPDEX_LLM_BASE_URL is set, else offline)")
    ingest.add_argument("--llm-model", help="model for every LLM step (default gpt-4o-mini or "
                                             "PROPDEX_LLM_MODEL)")
    ingest.add_argument("--chunk-size", type=int, help="target chunk length in characters (default 800)")
    ingest.add_argument("--chunk-overlap", type=int,
                        help="characters shared with the previous chunk (default 0)")
    ingest.add_argument("--chunker", choices=["fixed", "recursive", "passages", "semantic", "llm"],
                        help="chunking method (default recursive; llm needs an LLM)")
    ingest.add_argument("--sectioning", action=argparse.BooleanOptionalAction,
                        help="divide documents into titled sections before chunking (default off; "
                             "without an LLM: the outline, headings or heading lines)")
    ingest.add_argument("--pdf-reader", choices=["layout", "fast"],
                        help="how PDFs are read: layout = PyMuPDF's layout engine (headings, "
                        "tables, page regions; default), fast = plain text lines, ~100x faster")
    ingest.add_argument("--document-concurrency", type=int, metavar="N",
                        help="documents processed at once, at most (default 4 or "
                             "PROPDEX_DOCUMENT_CONCURRENCY); 1 for a slow LLM server or "
                             "little memory")
    ingest.add_argument("--no-prune", action="store_true",
                        help="keep documents whose files left the given folders")
    ingest.add_argument("--force", action="store_true", help="re-process unchanged documents")
    ingest.add_argument("--meta", action="append", metavar="KEY=VALUE",
                        help="metadata for every file of this ingest (repeatable); a file's "
                             "front matter or <file>.meta.json wins key by key")
    ingest.add_argument("--nice", type=int, choices=range(20), metavar="0-19",
                        help="run at this lower CPU priority, in a session of its own, so a "
                             "`propdex serve` on the machine keeps its CPU (PROPDEX_INGEST_NICE)")
    ingest.add_argument("--json", action="store_true", help="print the run summary as JSON")
    ingest.add_argument("--dask", nargs="?", const="local", metavar="ADDRESS",
                        help="run the tasks on the Dask scheduler at ADDRESS (tcp://host:8786); "
                             "without ADDRESS, on a local cluster of worker processes")
    ingest.set_defaults(func=cmd_ingest)

    search = with_db(commands.add_parser("search", help="search the index"))
    search.add_argument("query", help="the question or keywords")
    # No defaults here: importing propdex.search for them would cost the service client
    # LanceDB's import; left out, the search defaults apply (propdex.search.DEFAULT_*),
    # which the help names (tests/test_search.py keeps the two the same).
    search.add_argument("--level", choices=["propositions", "chunks", "both"],
                        help="what is ranked (default: both)")
    search.add_argument("--mode", choices=["vector", "fts", "hybrid"],
                        help="how it is ranked (default: hybrid)")
    search.add_argument("-k", type=int, help="results wanted (default: 5)")
    search.add_argument("--doc", action="append", metavar="DOC_ID",
                        help="restrict to a document by its doc_id (repeatable)")
    search.add_argument("--source", help="restrict to sources matching this glob")
    search.add_argument("--where", action="append", metavar="KEY=VALUE",
                        help="only documents whose metadata has KEY=VALUE (repeatable: all "
                             "must hold)")
    search.add_argument("--json", action="store_true", help="print the results as a JSON array")
    search.set_defaults(func=cmd_search)

    serve = with_db(commands.add_parser(
        "serve", help="serve the index over HTTP (POST /search, GET /documents, /chunks, /health)"))
    serve.add_argument("--host", help="address to bind (default 127.0.0.1 or PROPDEX_SERVE_HOST; "
                                      "any other than loopback needs PROPDEX_API_TOKEN)")
    serve.add_argument("--port", type=int, help="port (default 8765 or PROPDEX_SERVE_PORT)")
    serve.add_argument("--workers", type=int, metavar="N",
                       help="worker processes on the port, each with its own reader and "
                            "embedder (default 1; PROPDEX_SERVE_WORKERS)")
    serve.set_defaults(func=cmd_serve)

    mcp = with_db(commands.add_parser(
        "mcp", help="MCP server on stdin/stdout with the tools search and get_chunk"))
    mcp.set_defaults(func=cmd_mcp)

    status = with_db(commands.add_parser("status", help="each document's state"))
    status.add_argument("--json", action="store_true", help="print the documents as JSON")
    status.set_defaults(func=cmd_status)

    verify = with_db(commands.add_parser(
        "verify", help="check the tables against each other",
        description="Check the tables against each other and the documents ledger: each "
        "problem is printed and the exit code is 5. Rows of a run that never committed "
        "(an ingest killed or crashed mid-run) are no problem: search ignores them and the "
        "next ingest removes them. They are printed as 'leftover: run RUN_ID left ...' lines "
        "and, with nothing else wrong, the exit code is 0."))
    verify.set_defaults(func=cmd_verify)

    watch = commands.add_parser(
        "watch", help="emit a propdex.source.changed Prefect event for each changed source file")
    watch.add_argument("folder", metavar="DIR", help="folder to watch (recursively)")
    watch.add_argument("--db", help="index the triggered runs write to (default: the deployment's)")
    watch.add_argument("--debounce-ms", type=int, default=1600,
                       help="wait this long for changes to settle into one event (default %(default)s)")
    watch.set_defaults(func=cmd_watch)

    evaluate = with_db(commands.add_parser(
        "eval", help="compare chunks, headed chunks, sentences, propositions and every search "
        "level x mode on questions"))
    evaluate.add_argument("questions", metavar="QUESTIONS.jsonl",
                          help="one JSON object per line: question, answer, evidence, pages, source")
    evaluate.add_argument("--out", default="propdex-eval",
                          help="folder for report.md, report.json and recall.png "
                               "(default %(default)s)")
    evaluate.add_argument("-k", type=int, nargs="+", default=[1, 5, 20],
                          help="cut-offs of passage-level Recall@k (default 1 5 20)")
    evaluate.add_argument("--words", type=int, nargs="+", default=[100, 200, 500],
                          help="word budgets of answer recall (default 100 200 500)")
    evaluate.add_argument("--top", type=int, default=5,
                          help="top units counted as retrieved words and answered from "
                               "(default %(default)s)")
    evaluate.add_argument("--answers", action="store_true",
                          help="write and grade answers with the configured LLM (0-10)")
    evaluate.add_argument("--llm-model", help="model that writes and grades the answers "
                                               "(default PROPDEX_LLM_MODEL)")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.set_defaults(func=cmd_eval)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit code. Ctrl-C while it runs makes it
    EXIT_INTERRUPTED, whatever the command made of the KeyboardInterrupt (interrupts)."""
    with interrupts.watched() as ctrl_c:
        return exit_code(argv, ctrl_c)


def exit_code(argv: Sequence[str] | None, ctrl_c: CtrlC) -> int:
    """Run the command ``argv`` names with ``ctrl_c`` handling SIGINT; its exit code."""
    args = build_parser().parse_args(argv)
    try:
        try:
            code = args.func(args)
            # What is still buffered goes out here, where a reader that went away is caught
            # below, rather than at exit (Python's note on SIGPIPE, in the signal module's docs).
            sys.stdout.flush()
        finally:
            # The exit code is being decided: from here Ctrl-C is noted, not raised, so no
            # KeyboardInterrupt escapes the handlers below (nor main's caller).
            ctrl_c.raising = False
    except StorageError as exc:
        print(f"propdex: {exc}", file=sys.stderr)
        code = EXIT_STORAGE
    except (SearchRequestError, IndexNotFoundError) as exc:  # a search the user must change
        print(f"propdex: {exc}", file=sys.stderr)
        code = EXIT_USAGE
    except PropdexError as exc:
        print(f"propdex: {exc}", file=sys.stderr)
        code = EXIT_FAILED_DOCS
    except ValueError as exc:  # invalid settings from the environment or flags
        print(f"propdex: {exc}", file=sys.stderr)
        code = EXIT_USAGE
    except KeyboardInterrupt:
        # Ctrl-C: no traceback. An ingest's documents are committed one by one, each whole,
        # so what it committed stays and the same command finishes the rest.
        code = ctrl_c.report()
    except BrokenPipeError:
        # The reader went away (`propdex search ... | head`): not an error of ours. Point
        # stdout at devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    # Also when the KeyboardInterrupt was caught on its way: a Prefect flow run drops one
    # that lands after its final state was recorded, and returns its result.
    return ctrl_c.report() if ctrl_c.received else code


def run() -> NoReturn:
    """The `propdex` command: ``main`` in a process that exits when it returns. Ctrl-C from
    start to exit makes the exit status EXIT_INTERRUPTED (interrupts.watched_until_exit)."""
    ctrl_c = interrupts.watched_until_exit()
    code = exit_code(None, ctrl_c)
    # The process ends here, and its last garbage collections would walk every object the
    # imports made (pydantic's models and more), a noticeable part of a one-shot search.
    # Frozen objects are left to the OS. Not in main(): the tests call it in their own process.
    if {"prefect", "openai"} <= sys.modules.keys():
        # A flow run with an OpenAI-compatible server leaves objects holding openai clients
        # (the planner's LLM backend) in reference cycles, and the clients' finalizers need
        # their modules, closed clients' too: frozen, they would run as the interpreter tears
        # the modules down and print an AttributeError ("'NoneType' object has no attribute
        # 'CLOSED'") after the report. Collected now: a fraction of a second, at the end of a
        # run that waited on an LLM server.
        gc.collect()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
