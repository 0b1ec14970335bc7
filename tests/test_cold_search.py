"""What a one-shot search imports: LanceDB, which reads the index, but not pylance, Prefect
or torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.service_harness import REPO


def test_a_one_shot_search_imports_neither_pylance_nor_prefect_nor_torch(tmp_path):
    from propdex.runtime import embedder_for
    from propdex.settings import Settings
    from propdex.store import Index
    from tests.store_rows import make_version

    embedder = embedder_for(Settings())  # converts MiniLM to ONNX once if not cached yet
    texts = ["Owls hunt small mammals at night.", "Bees make honey from nectar."]
    vectors = embedder.embed(texts)
    Index.open(str(tmp_path / "db"), dim=embedder.dim).replace_document(*make_version(
        "a", "r1", texts, props={0: [texts[0]], 1: [texts[1]]},
        chunk_vectors=dict(enumerate(vectors)),
        prop_vectors={(0, 0): vectors[0], (1, 0): vectors[1]}, embed_model=embedder.name).rows)
    code = f"""
import json, sys
from propdex.cli import main
main(["search", "Which animal makes honey?", "--db", {str(tmp_path / "db")!r}, "--json"])
heavy = {{"lance", "prefect", "torch", "sentence_transformers", "transformers"}}
print(sorted(heavy & {{m.split(".")[0] for m in sys.modules}}), file=sys.stderr)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=True)
    first = json.loads(done.stdout)[0]["text"]
    assert ("Bees make honey from nectar.", "[]") == (first, done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(("configured", "cores", "expected"), [
    (0, 8, 2),  # two threads embed a query in 9 ms instead of 14 (AVX2 EPYC)
    (0, 1, 1),  # never more threads than the process may use
    (3, 8, 3),  # a configured count is kept
])
def test_queries_are_embedded_on_two_threads_unless_configured(monkeypatch, configured,
                                                               cores, expected):
    from propdex.embed import query
    from propdex.settings import Settings

    monkeypatch.setattr(query, "usable_cores", lambda: cores)
    assert expected == query.query_settings(Settings(embed_threads=configured)).embed_threads


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=True)
    return done.stdout.strip()


def test_a_query_embedded_in_a_forked_child_equals_the_one_embedded_here():
    # A fresh process: one thread, as a one-shot `propdex search` has when it forks.
    code = """
import sys
import numpy as np
from propdex.embed.query import embed_query_in_child, query_settings
from propdex.settings import Settings
settings = Settings()
vector = embed_query_in_child(settings, "Which animal makes honey?")()
embedded_there = "onnxruntime" not in sys.modules  # the child loaded the model, not us
from propdex.runtime import embedder_for
here = embedder_for(query_settings(settings)).embed_query("Which animal makes honey?")
print(embedded_there, vector.shape, bool(np.allclose(vector, here, atol=1e-6)))
"""
    assert "True (384,) True" == _run(code)


def test_no_child_is_forked_while_other_threads_run():
    code = """
import threading
from propdex.embed.query import embed_query_in_child
from propdex.settings import Settings
stop = threading.Event()
other = threading.Thread(target=stop.wait)
other.start()
print(embed_query_in_child(Settings(), "owls"))
stop.set()
"""
    assert "None" == _run(code)


def test_a_child_that_cannot_embed_leaves_the_query_to_the_caller(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # the model cannot be converted under it
    code = f"""
from propdex.embed.query import embed_query_in_child
from propdex.settings import Settings
print(embed_query_in_child(Settings(onnx_dir={str(blocker / "onnx")!r}), "owls")())
"""
    assert "None" == _run(code)


@pytest.mark.parametrize(("args", "status", "stdout"), [
    (["search", "owls", "--mode", "fts", "--json"], 0, "[]"),  # an empty index
    (["search", "owls", "--k", "0"], 2, ""),  # a usage error
])
def test_the_command_exits_with_the_status_of_main(tmp_path, args, status, stdout):
    (tmp_path / "db").mkdir()
    done = subprocess.run([sys.executable, "-m", "propdex.cli", *args, "--db",
                           str(tmp_path / "db")], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert (status, stdout) == (done.returncode, done.stdout.strip())


def test_a_search_that_needs_no_vector_still_waits_for_its_child(tmp_path):
    (tmp_path / "db").mkdir()
    code = f"""
import os
from propdex.cli import main
main(["search", "owls", "--db", {str(tmp_path / "db")!r}])  # an empty index: nothing to rank
try:
    os.waitpid(-1, os.WNOHANG)
    print("a child is left")
except ChildProcessError:
    print("no child is left")
"""
    assert "no results\nno child is left" == _run(code)
