"""Fuzzing extraction: real PDFs with flipped bytes and cut short. Every mutant ends in a
document or an ExtractionError (a status), never a crash of the caller or a hang: PyMuPDF
runs in a worker process bounded by a deadline (propdex.extract.isolated)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from propdex.deadlines import Deadline
from propdex.errors import DocumentTimeoutError, ExtractionError
from propdex.extract.isolated import extract_isolated
from propdex.settings import Settings
from tests.pdf_factory import pdf_bytes

MUTANTS_PER_FILE = 6
SECONDS_PER_MUTANT = 60.0
PAGES = ["Mutation testing flips bytes in a file. " * 20, "A second page of plain words. " * 20]


def mutants(data: bytes, seed: int) -> list[tuple[str, bytes]]:
    """Byte flips in a few places, and truncations at random lengths."""
    rng = random.Random(seed)
    found = []
    for number in range(MUTANTS_PER_FILE):
        if number % 2:
            cut = rng.randrange(1, len(data))
            found.append((f"truncated-{cut}", data[:cut]))
        else:
            flipped = bytearray(data)
            for offset in rng.sample(range(len(data)), 16):
                flipped[offset] ^= 1 << rng.randrange(8)
            found.append((f"flipped-{number}", bytes(flipped)))
    return found


def outcome(path: Path) -> str:
    deadline = Deadline(str(path), time.monotonic() + SECONDS_PER_MUTANT, SECONDS_PER_MUTANT)
    try:
        extract_isolated(path, Settings(), deadline)
        return "document"
    except DocumentTimeoutError:
        return "timed out"
    except ExtractionError:
        return "status"


@pytest.mark.parametrize("seed", [1, 2])
def test_mutants_of_a_generated_pdf_end_in_a_status(tmp_path, seed):
    results = []
    for name, data in mutants(pdf_bytes(PAGES), seed):
        path = tmp_path / f"{name}.pdf"
        path.write_bytes(data)
        results.append(outcome(path))
    assert set(results) <= {"document", "status"}


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["levels_of_agi.pdf", "mck_energy_first_5_pages.pdf"])
def test_mutants_of_corpus_pdfs_end_in_a_status(corpus, tmp_path, name):
    data = (corpus / name).read_bytes()
    results = []
    for label, mutant in mutants(data, seed=len(name)):
        path = tmp_path / f"{label}.pdf"
        path.write_bytes(mutant)
        results.append(outcome(path))
    assert set(results) <= {"document", "status"}
