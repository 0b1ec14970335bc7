"""Compatibility run: every kind of request propdex makes, once each, against any server.

Runs title, summary, propositions and grading (through the openai backend, so the output
caps and the structured-output negotiation are the pipeline's own), one copy request of the
llm chunker and an embeddings probe, and prints a Markdown table: the outcome, the
structured-output form used, the output cap sent, the finish reason, whether the server
reported usage, tokens and latency. Each step's requests are listed (a repair shows as a
second row). It checks the plumbing, not the quality of the model's answers.

    python bench/compat.py --base-url http://127.0.0.1:8080/v1 --model NAME [--embed-model NAME]

The key comes from PROPDEX_LLM_API_KEY or OPENAI_API_KEY (local servers need none).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from propdex.chunking.llm import MARKER, marked_copy_cuts  # noqa: E402
from propdex.chunking.llm_requests import ChunkingRequests  # noqa: E402
from propdex.embed.openai_embed import OpenAIEmbedder  # noqa: E402
from propdex.errors import LLMError  # noqa: E402
from propdex.llm.client import CallRecord  # noqa: E402
from propdex.llm.openai_backend import OpenAIBackend  # noqa: E402
from propdex.llm.output_caps import copy_cap, output_cap  # noqa: E402
from propdex.llm.prompts import load_prompt  # noqa: E402
from propdex.llm.structured import negotiated_notes  # noqa: E402
from propdex.settings import Settings  # noqa: E402

TITLE = "The Eiffel Tower"
DOCUMENT = (
    "The Eiffel Tower\n\n"
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "from 1887 to 1889.\n\n"
    "The tower is 330 metres tall, about the same height as an 81-storey building. It was the "
    "tallest man-made structure in the world until the Chrysler Building in New York City was "
    "finished in 1930. The tower has three levels for visitors, with restaurants on the first "
    "and second levels."
)
CHUNK = DOCUMENT.split("\n\n", 2)[2]


@dataclass
class Row:
    step: str
    outcome: str
    mode: str = "-"
    cap: str = "-"
    finish: str = "-"
    usage: str = "-"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0


def rows_of(step: str, outcome: str, records: list[CallRecord], seconds: float) -> list[Row]:
    if not records:
        return [Row(step, outcome, seconds=seconds)]
    rows = []
    for i, r in enumerate(records):
        rows.append(Row(
            step if i == 0 else f"{step} (repair)", outcome if i == len(records) - 1 else "invalid, repaired",
            r.mode, f"{r.cap_field}={r.cap}" if r.cap is not None else "none", r.finish_reason or "-",
            "yes" if r.usage_reported else "no", r.prompt_tokens, r.completion_tokens, round(r.seconds, 2),
        ))
    return rows


def run_json_steps(backend: OpenAIBackend) -> list[Row]:
    records: list[CallRecord] = []
    backend.client.on_call = records.append
    propositions: list[str] = []
    steps = {
        "title": lambda: backend.title(DOCUMENT, truncated=False, hint=None),
        "summary": lambda: backend.summary(DOCUMENT, title=TITLE, truncated=False),
        "propositions": lambda: backend.propositions(CHUNK, title=TITLE, section=None),
        "grading": lambda: backend.grade(CHUNK, propositions or [CHUNK.split(". ")[0] + "."],
                                         title=TITLE, section=None),
    }
    rows: list[Row] = []
    for step, call in steps.items():
        records.clear()
        started = time.perf_counter()
        try:
            value = call().value
            if step == "propositions":
                propositions = value
            outcome = describe(step, value)
        except LLMError as error:
            outcome = f"failed: {error}"[:160]
        rows += rows_of(step, outcome, list(records), time.perf_counter() - started)
    return rows


def describe(step: str, value: object) -> str:
    if step == "propositions":
        return f"ok: {len(value)} propositions"  # type: ignore[arg-type]
    if step == "grading":
        return f"ok: {len(value)} grades"  # type: ignore[arg-type]
    return f"ok: {str(value)[:60]!r}"


def run_copy(settings: Settings) -> Row:
    requests = ChunkingRequests(settings)
    messages = load_prompt("llm_chunk").messages(marker=MARKER, target=settings.chunk_size, document=DOCUMENT)
    cap = output_cap("llm_chunk", settings, copy_cap(len(DOCUMENT)))
    started = time.perf_counter()
    try:
        answer = requests.copy(messages, len(DOCUMENT))
    except LLMError as error:
        return Row("llm chunker (copy)", f"failed: {error}"[:160], seconds=time.perf_counter() - started)
    finally:
        requests.close()
    cuts = marked_copy_cuts(DOCUMENT, answer.text)
    outcome = ("cut off (recursive fallback)" if answer.cut_off else
               "not copied verbatim (recursive fallback)" if cuts is None else f"ok: {len(cuts)} cuts")
    return Row("llm chunker (copy)", outcome, "text", f"max_tokens={cap}" if cap else "none",
               "length" if answer.cut_off else "stop", "yes" if answer.usage.prompt_tokens else "no",
               answer.usage.prompt_tokens, answer.usage.completion_tokens,
               round(time.perf_counter() - started, 2))


def run_embeddings(settings: Settings) -> Row:
    embedder = OpenAIEmbedder(settings)
    started = time.perf_counter()
    try:
        vectors = embedder.embed(["The Eiffel Tower is in Paris."])
        outcome = f"ok: {vectors.shape[1]} dimensions"
    except LLMError as error:
        outcome = f"failed: {error}"[:160]
    finally:
        embedder.close()
    return Row("embeddings", outcome, seconds=round(time.perf_counter() - started, 2))


def markdown(rows: list[Row]) -> str:
    lines = ["| step | outcome | structured output | output cap | finish | usage reported | prompt tokens | completion tokens | latency (s) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r.step, r.outcome.replace("|", "\\|").replace("\n", " "), r.mode, r.cap, r.finish, r.usage,
                 "-" if r.prompt_tokens is None else str(r.prompt_tokens),
                 "-" if r.completion_tokens is None else str(r.completion_tokens), f"{r.seconds:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model", required=True, help="chat model for every step")
    parser.add_argument("--embed-model", help="embeddings model (default: --model)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args(argv)

    settings = Settings(llm="openai", llm_base_url=args.base_url, llm_model=args.model,
                        embedder="openai", embed_model=args.embed_model or args.model,
                        llm_timeout=args.timeout, llm_max_attempts=2, llm_concurrency=1)
    backend = OpenAIBackend(settings)
    try:
        rows = run_json_steps(backend)
    finally:
        backend.close()
    rows += [run_copy(settings), run_embeddings(settings)]
    print(markdown(rows))
    for note in negotiated_notes(backend.client.base_url):
        print(f"\nStructured output negotiated: {note}")
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
