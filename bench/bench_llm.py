"""LLM-stage benchmark on the scripted OpenAI-compatible server (200 ms per call by default).

(a) LLM calls and prompt tokens per chunk: propdex (one proposition call and one grading call
    per chunk) against the source notebook's design (one proposition call per chunk, then one
    grading call per proposition), same chunks, same server, same fake model. The notebook's
    two functions are reproduced below with its prompts and parsing.
(b) Wall time of propdex's LLM stage (chunks through a thread pool of ``concurrency`` workers,
    propositions then grading per chunk; and the same pool with each grading call submitted as
    its own task) against its bound ceil(calls / concurrency) x latency.

The fake model splits a chunk into its sentences for both designs, so both grade the same
number of propositions (a real model writes more propositions than sentences, which would
only raise the notebook's grading calls). Prompt tokens are the server's estimate
(characters / 4) of every message, shown with the response_format field counted (hosted APIs
put the JSON schema into the prompt) and without it (constrained-decoding servers do not).
The server runs in a child process, as a real one would run elsewhere.

Run from the repository root:  python bench/bench_llm.py [--pdf PATH] [--latency-ms 200]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import openai

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from propdex.chunking import chunk_document  # noqa: E402
from propdex.extract import extract_document  # noqa: E402
from propdex.llm.openai_backend import OpenAIBackend  # noqa: E402
from propdex.models import Chunk  # noqa: E402
from propdex.settings import Settings  # noqa: E402
from tests.scripted_server import (  # noqa: E402
    DEFAULT_MODEL,
    ScriptedServer,
    prompt_tokens_of,
    sentences,
)

DEFAULT_PDF = REPO.parent / "shared" / "corpus" / "levels_of_agi.pdf"

# ---------------------------------------------------------------- the notebook's design
# Prompts as the notebook writes them (indentation included: it is part of what is sent).

NOTEBOOK_PROPOSITION_SYSTEM = """Please break down the following text into simple, self-contained propositions. 
    Ensure that each proposition meets the following criteria:

    1. Express a Single Fact: Each proposition should state one specific fact or claim.
    2. Be Understandable Without Context: The proposition should be self-contained, meaning it can be understood without needing additional context.
    3. Use Full Names, Not Pronouns: Avoid pronouns or ambiguous references; use full entity names.
    4. Include Relevant Dates/Qualifiers: If applicable, include necessary dates, times, and qualifiers to make the fact precise.
    5. Contain One Subject-Predicate Relationship: Focus on a single subject and its corresponding action or attribute, without conjunctions or multiple clauses.

    Output ONLY the list of propositions without any additional text or explanations."""  # noqa: E501, W291

NOTEBOOK_GRADING_SYSTEM = """You are an expert at evaluating the quality of propositions extracted from text.
    Rate the given proposition on the following criteria (scale 1-10):

    - Accuracy: How well the proposition reflects information in the original text
    - Clarity: How easy it is to understand the proposition without additional context
    - Completeness: Whether the proposition includes necessary details (dates, qualifiers, etc.)
    - Conciseness: Whether the proposition is concise without losing important information

    The response must be in valid JSON format with numerical scores for each criterion:
    {"accuracy": X, "clarity": X, "completeness": X, "conciseness": X}
    """

NOTEBOOK_PROPOSITION_USER = "Text to convert into propositions:\n\n"


def notebook_generate_propositions(client: openai.OpenAI, model: str, chunk_text: str) -> list[str]:
    response = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": NOTEBOOK_PROPOSITION_SYSTEM},
            {"role": "user", "content": f"{NOTEBOOK_PROPOSITION_USER}{chunk_text}"},
        ],
        temperature=0,
    )
    raw_propositions = response.choices[0].message.content.strip().split("\n")
    clean_propositions = []
    for prop in raw_propositions:
        cleaned = re.sub(r"^\s*(\d+\.|\-|\*)\s*", "", prop).strip()
        if cleaned and len(cleaned) > 10:
            clean_propositions.append(cleaned)
    return clean_propositions


def notebook_evaluate_proposition(
    client: openai.OpenAI, model: str, proposition: str, original_text: str
) -> dict[str, int]:
    user_prompt = f"""Proposition: {proposition}

    Original Text: {original_text}

    Please provide your evaluation scores in JSON format."""
    response = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": NOTEBOOK_GRADING_SYSTEM},
            {"role": "user", "content": user_prompt},
        ],
        response_format={"type": "json_object"},
        temperature=0,
    )
    try:
        return json.loads(response.choices[0].message.content.strip())
    except json.JSONDecodeError:
        return {"accuracy": 5, "clarity": 5, "completeness": 5, "conciseness": 5}


def notebook_chunk(client: openai.OpenAI, model: str, chunk_text: str) -> None:
    for proposition in notebook_generate_propositions(client, model, chunk_text):
        notebook_evaluate_proposition(client, model, proposition, chunk_text)


def answer_notebook_prompts(step: str | None, body: dict[str, Any]) -> str | None:
    """The fake model's answers to the notebook's prompts (same sentence split as ours)."""
    messages = body.get("messages", [])
    system = messages[0]["content"] if messages else ""
    user = messages[-1]["content"] if messages else ""
    if system == NOTEBOOK_PROPOSITION_SYSTEM:
        return "\n".join(sentences(user.removeprefix(NOTEBOOK_PROPOSITION_USER)))
    if system == NOTEBOOK_GRADING_SYSTEM:
        return json.dumps({"accuracy": 8, "clarity": 8, "completeness": 8, "conciseness": 8})
    return None  # propdex's prompts: the server's default answers


# ---------------------------------------------------------------- propdex's design


def propdex_chunk(backend: OpenAIBackend, chunk: Chunk, title: str) -> None:
    found = backend.propositions(chunk.text, title=title, section=chunk.section)
    backend.grade(chunk.text, found.value, title=title, section=chunk.section)


def run_pipelined(backend: OpenAIBackend, chunks: list[Chunk], title: str, workers: int) -> float:
    """The stage with each chunk's grading call submitted as its own task once the chunk's
    propositions arrive, so no worker sits between a chunk's two calls and the pool stays
    full until the last call."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending = {
            pool.submit(backend.propositions, c.text, title=title, section=c.section): c
            for c in chunks
        }
        gradings = []
        for done in as_completed(pending):
            chunk = pending[done]
            gradings.append(pool.submit(
                backend.grade, chunk.text, done.result().value, title=title, section=chunk.section
            ))
        for grading in gradings:
            grading.result()
    return time.perf_counter() - started


# ---------------------------------------------------------------- measuring


def chat_prompt_tokens(server: ScriptedServer) -> tuple[int, int]:
    """Prompt tokens of the chat calls, with and without the response_format field: hosted
    APIs put a JSON schema into the prompt, constrained-decoding servers (vLLM, llama.cpp)
    do not."""
    bodies = [r.body for r in server.requests if r.path == "/v1/chat/completions"]
    without = [{k: v for k, v in b.items() if k != "response_format"} for b in bodies]
    return sum(map(prompt_tokens_of, bodies)), sum(map(prompt_tokens_of, without))


def serve(connection: Connection, latency_ms: float) -> None:
    """The scripted server in a child process, answering "take" (the calls and prompt tokens
    since the last take) until "stop". A separate process, like a real server: in-process,
    its request handling would compete with the client for the GIL and inflate wall times."""
    with ScriptedServer(latency_ms=latency_ms, responder=answer_notebook_prompts) as server:
        connection.send(server.url)
        while connection.recv() == "take":
            connection.send((server.calls(), chat_prompt_tokens(server)))
            server.reset()


class ServerProcess:
    def __init__(self, latency_ms: float):
        self._connection, child_end = multiprocessing.Pipe()
        # fork: the child needs nothing but what this module already imported
        context = multiprocessing.get_context("fork")
        self._process = context.Process(target=serve, args=(child_end, latency_ms), daemon=True)
        self._process.start()
        self.url: str = self._connection.recv()

    def take(self) -> tuple[int, tuple[int, int]]:
        """Chat calls and their prompt tokens (with, without the schema) since the last take."""
        self._connection.send("take")
        return self._connection.recv()

    def stop(self) -> None:
        self._connection.send("stop")
        self._process.join()


def run_stage(work, items: list, workers: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(work, items):
            pass
    return time.perf_counter() - started


def settings_for(url: str, concurrency: int) -> Settings:
    return Settings(
        llm="openai",
        llm_base_url=url + "/v1",
        llm_api_key="sk-bench",
        llm_model=DEFAULT_MODEL,
        llm_concurrency=concurrency,
        llm_timeout=30.0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pdf", type=Path, default=DEFAULT_PDF)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    args = parser.parse_args()
    if not args.pdf.is_file():
        sys.exit(f"no PDF at {args.pdf} (the reference corpus lives in ../shared/corpus)")

    chunk_settings = Settings(chunk_size=800, chunk_overlap=0)
    document = extract_document(args.pdf, chunk_settings)
    chunks = chunk_document(document, chunk_settings)
    title = document.title_hint or args.pdf.stem
    latency = args.latency_ms / 1000
    print(f"{args.pdf.name}: {len(document.text)} characters, {len(chunks)} chunks of <= 800 "
          f"characters; scripted server at {args.latency_ms:g} ms per call\n")

    server = ServerProcess(args.latency_ms)
    try:
        # (a) calls and prompt tokens, both designs with the same pool of 8 workers
        backend = OpenAIBackend(settings_for(server.url, 8))
        run_stage(lambda c: propdex_chunk(backend, c, title), chunks, 8)
        backend.close()
        ours_calls, (ours_tokens, ours_bare) = server.take()

        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-bench", max_retries=0)
        run_stage(lambda c: notebook_chunk(client, DEFAULT_MODEL, c.text), chunks, 8)
        client.close()
        base_calls, (base_tokens, base_bare) = server.take()

        n = len(chunks)
        print("### (a) LLM calls and prompt tokens per chunk\n")
        print("| design | calls | calls / chunk | prompt tokens | prompt tokens / chunk "
              "| same, response_format not counted |")
        print("|---|---:|---:|---:|---:|---:|")
        print(f"| notebook (1 extraction + 1 grading call per proposition) | {base_calls} | "
              f"{base_calls / n:.2f} | {base_tokens} | {base_tokens / n:.0f} | "
              f"{base_bare / n:.0f} |")
        print(f"| propdex (1 extraction + 1 grading call per chunk) | {ours_calls} | "
              f"{ours_calls / n:.2f} | {ours_tokens} | {ours_tokens / n:.0f} | "
              f"{ours_bare / n:.0f} |")
        print(f"\nprompt tokens, notebook / propdex: {base_tokens / ours_tokens:.2f}x with the "
              f"JSON schema counted as prompt, {base_bare / ours_bare:.2f}x without it "
              f"(target >= 3x); calls per chunk {ours_calls / n:.2f} (target <= 2)\n")

        # (b) wall time against the bound
        print("### (b) LLM stage wall time against ceil(calls / concurrency) x latency\n")
        print("| concurrency | stage | calls | wall time (s) | bound (s) | wall / bound |")
        print("|---:|---|---:|---:|---:|---:|")
        for concurrency in args.concurrency:
            stages = {
                "per chunk: propositions then grading": lambda b, n=concurrency: run_stage(
                    lambda c: propdex_chunk(b, c, title), chunks, n
                ),
                "grading as its own task": lambda b, n=concurrency: run_pipelined(
                    b, chunks, title, n),
            }
            for name, stage in stages.items():
                backend = OpenAIBackend(settings_for(server.url, concurrency))
                wall = stage(backend)
                backend.close()
                calls, _ = server.take()
                bound = math.ceil(calls / concurrency) * latency
                print(f"| {concurrency} | {name} | {calls} | {wall:.2f} | {bound:.2f} | "
                      f"{wall / bound:.2f} |")
        print(f"\nper chunk, the two calls are sequential, so that stage cannot beat "
              f"2 x ceil(chunks / concurrency) x latency ({len(chunks)} chunks)")
    finally:
        server.stop()

if __name__ == "__main__":
    main()
