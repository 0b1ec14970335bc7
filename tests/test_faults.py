"""Faults: a document stuck in extraction or in the LLM is failed "timed out" without
holding the run, and a decompression-bomb-like PDF is refused without exhausting memory."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import zlib
from pathlib import Path

import pytest

from propdex.cli import main
from propdex.deadlines import Deadline
from propdex.errors import DocumentTimeoutError, DocumentTooLargeError, ExtractionError
from propdex.extract import isolated
from propdex.extract.isolated import (
    drop_early_extractions,
    extract_isolated,
    start_extractions,
    start_workers,
    stop_workers,
)
from propdex.ids import normalise_source
from propdex.settings import Settings
from tests.pdf_factory import make_pdf
from tests.scripted_fixtures import SENTINEL_KEY
from tests.scripted_server import hang


def content_pdf(path: Path, operators: bytes, repeat: int) -> Path:
    """A one-page PDF whose content stream is ``operators`` repeated ``repeat`` times,
    compressed as it is written (a small file that expands enormously)."""
    packer = zlib.compressobj(9)
    block = operators * 100_000
    stream = b"".join(packer.compress(block) for _ in range(repeat // 100_000)) + packer.flush()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


@pytest.fixture(scope="module")
def slow_pdf(tmp_path_factory) -> Path:
    # Millions of save/restore operators: seconds of MuPDF work, no text, a few KB on disk.
    return content_pdf(tmp_path_factory.mktemp("slow") / "slow.pdf", b"q Q ", 30_000_000)


def test_extraction_stuck_past_the_deadline_times_out(slow_pdf, tmp_path):
    warm = make_pdf(tmp_path / "warm.pdf", ["A page to start the worker process."])
    extract_isolated(warm, Settings())  # the worker's start-up is not the document's time
    deadline = Deadline(str(slow_pdf), time.monotonic() + 1.0, 1.0)
    with pytest.raises(DocumentTimeoutError) as caught:
        extract_isolated(slow_pdf, Settings(), deadline)
    assert "timed out: not done within document_timeout_s=1 s (extraction)" == caught.value.reason


def test_a_killed_worker_is_replaced_for_the_next_document(slow_pdf, tmp_path):
    with pytest.raises(DocumentTimeoutError):
        extract_isolated(slow_pdf, Settings(), Deadline(str(slow_pdf), time.monotonic() + 0.5, 0.5))
    good = make_pdf(tmp_path / "good.pdf", ["Basalt is a volcanic rock."])
    assert "Basalt is a volcanic rock." == extract_isolated(good, Settings()).text


def test_a_text_bomb_is_refused_within_the_memory_ceiling(tmp_path):
    # ~40 MB of text operators from a ~100 KB file: more text than 64 MB of MuPDF memory holds.
    bomb = content_pdf(tmp_path / "bomb.pdf", b"BT /F1 11 Tf 50 100 Td (AAAAAAAAAAAAAAAAAAAA) Tj ET ",
                       800_000)
    with pytest.raises(DocumentTooLargeError) as caught:
        extract_isolated(bomb, Settings(extract_memory_mb=64))
    assert caught.value.reason.startswith("too large: extraction needs more than extract_memory_mb=64")


def test_a_huge_page_count_is_refused(tmp_path):
    import pymupdf

    doc = pymupdf.open()
    for _ in range(60):
        doc.new_page()
    doc.save(tmp_path / "pages.pdf")
    with pytest.raises(DocumentTooLargeError) as caught:
        extract_isolated(tmp_path / "pages.pdf", Settings(max_pages=50))
    assert "too large: 60 pages > max_pages 50" == caught.value.reason


@pytest.mark.prefect
def test_a_document_stuck_in_the_llm_times_out_and_the_run_goes_on(scripted_server, tmp_path,
                                                                     monkeypatch, capsys):
    for name, value in {
        "PROPDEX_LLM": "openai", "PROPDEX_LLM_BASE_URL": scripted_server.url + "/v1",
        "PROPDEX_LLM_API_KEY": SENTINEL_KEY, "PROPDEX_LLM_MODEL": "scripted-model",
        "PROPDEX_LLM_TIMEOUT": "300", "PROPDEX_EMBEDDER": "openai",
        "PROPDEX_EMBED_MODEL": "scripted-embed", "PROPDEX_DOCUMENT_TIMEOUT_S": "8",
    }.items():
        monkeypatch.setenv(name, value)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Basalt is a volcanic rock. It cools fast.\n", encoding="utf-8")
    (folder / "b.txt").write_text("Granite is an igneous rock. It cools slowly.\n", encoding="utf-8")
    scripted_server.script(hang(600), step="propositions")  # one request never answers

    code = main(["ingest", str(folder), "--db", str(tmp_path / "db"), "--json"])
    documents = json.loads(capsys.readouterr().out)["documents"]

    assert 1 == code
    assert ["failed", "indexed"] == sorted(d["status"] for d in documents)
    failed = next(d for d in documents if d["status"] == "failed")
    assert ("timeout", "timed out: not done within document_timeout_s=8 s (propositions)") == (
        failed["error_kind"], failed["error"])


def _extraction_workers() -> set[int]:
    """Live extraction worker processes started by this test process."""
    workers = set()
    for process in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            parent = int((process / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and b"propdex.extract.worker" in (process / "cmdline").read_bytes():
                workers.add(int(process.name))
    return workers


def _extract_in_background(path: Path, settings: Settings) -> threading.Thread:
    def read() -> None:
        with contextlib.suppress(ExtractionError):
            extract_isolated(path, settings)

    thread = threading.Thread(target=read)
    thread.start()
    return thread


def _end_extractions(threads: list[threading.Thread]) -> None:
    """End background extractions now instead of when MuPDF is done with the slow PDF (seconds
    more): killed workers end them as crashed extractions."""
    for pid in _extraction_workers():
        os.kill(pid, signal.SIGKILL)
    for thread in threads:
        thread.join()


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_documents_extracted_at_once_with_one_slot_share_one_worker_process(tmp_path):
    stop_workers()
    pdfs = [make_pdf(tmp_path / f"doc{n}.pdf", [f"Document {n} is about basalt."]) for n in range(3)]
    threads = [_extract_in_background(pdf, Settings(extract_workers=1)) for pdf in pdfs]
    for thread in threads:
        thread.join()
    assert 1 == len(_extraction_workers())


def _onnx_threads_of_workers() -> set[str]:
    values = set()
    for pid in _extraction_workers():
        variables = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        values |= {v.split(b"=", 1)[1].decode() for v in variables
                   if v.startswith(b"ORT_INTRA_OP_NUM_THREADS=")}
    return values


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
@pytest.mark.parametrize("slots", [1, 2])
def test_a_worker_runs_the_layout_engine_on_its_share_of_the_cores(slots, tmp_path, monkeypatch):
    monkeypatch.delenv("ORT_INTRA_OP_NUM_THREADS", raising=False)
    stop_workers()
    extract_isolated(make_pdf(tmp_path / "doc.pdf", ["Basalt is a volcanic rock."]),
                     Settings(extract_workers=slots))
    assert {str(max(1, len(os.sched_getaffinity(0)) // slots))} == _onnx_threads_of_workers()


def test_a_document_waiting_for_the_extraction_slot_times_out_at_its_deadline(slow_pdf, tmp_path):
    one_slot = Settings(extract_workers=1, pdf_reader="fast")
    busy = _extract_in_background(slow_pdf, one_slot)
    time.sleep(0.5)  # the slow document holds the only slot
    good = make_pdf(tmp_path / "good.pdf", ["Basalt is a volcanic rock."])
    try:
        with pytest.raises(DocumentTimeoutError):
            extract_isolated(good, one_slot, Deadline(str(good), time.monotonic() + 1.0, 1.0))
    finally:
        _end_extractions([busy])


def test_with_two_slots_a_document_is_read_while_another_is_busy(slow_pdf, tmp_path):
    two_slots = Settings(extract_workers=2, pdf_reader="fast")
    busy = _extract_in_background(slow_pdf, two_slots)
    time.sleep(0.5)
    good = make_pdf(tmp_path / "good.pdf", ["Basalt is a volcanic rock."])
    try:
        read = extract_isolated(good, two_slots).text
        still_busy = busy.is_alive()
    finally:
        _end_extractions([busy])
    assert ("Basalt is a volcanic rock.", True) == (read, still_busy)


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_workers_started_ahead_read_the_documents(tmp_path):
    stop_workers()
    two_slots = Settings(extract_workers=2)
    start_workers(two_slots, 3)
    started = _extraction_workers()
    pdfs = [make_pdf(tmp_path / f"doc{n}.pdf", [f"Document {n} is about basalt."]) for n in range(3)]
    threads = [_extract_in_background(pdf, two_slots) for pdf in pdfs]
    for thread in threads:
        thread.join()
    assert (2, started) == (len(started), _extraction_workers())


@pytest.mark.prefect
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_an_ingest_of_one_pdf_gives_its_extraction_worker_every_core(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROPDEX_LLM", "offline")
    monkeypatch.delenv("ORT_INTRA_OP_NUM_THREADS", raising=False)
    stop_workers()
    pdf = make_pdf(tmp_path / "one.pdf", ["Basalt is a volcanic rock. It cools fast."])

    code = main(["ingest", str(pdf), "--db", str(tmp_path / "db"), "--json"])

    assert (0, {str(len(os.sched_getaffinity(0)))}) == (code, _onnx_threads_of_workers())


def _start_early(paths: list[Path], settings: Settings) -> None:
    start_extractions([normalise_source(path) for path in paths], settings)


def _early_extractions_done() -> None:
    while not all(early.future.done() for early in isolated._early.values()):
        time.sleep(0.05)


def _busy_workers() -> set[int]:
    """Extraction workers at work (alive and not idle), once one is."""
    for _ in range(200):
        busy = _extraction_workers() - {worker.process.pid for worker in isolated._idle}
        if busy:
            time.sleep(0.3)  # the request reached it
            return busy
        time.sleep(0.05)
    raise AssertionError("no extraction worker started")


def _ended(pids: set[int]) -> bool:
    for _ in range(100):
        if not pids & _extraction_workers():
            return True
        time.sleep(0.05)
    return False


def test_an_extraction_started_early_is_taken_by_its_task_and_a_retry_reads_again(tmp_path):
    pdf = make_pdf(tmp_path / "doc.pdf", ["Basalt is a volcanic rock."])
    _start_early([pdf], Settings())
    _early_extractions_done()
    make_pdf(pdf, ["Granite is an igneous rock."])  # read after the early extraction
    first, second = (extract_isolated(pdf, Settings()).text for _ in range(2))
    assert ("Basalt is a volcanic rock.", "Granite is an igneous rock.") == (first, second)


def test_an_extraction_started_early_with_other_settings_is_not_taken(tmp_path):
    pdf = make_pdf(tmp_path / "doc.pdf", ["Basalt is a volcanic rock."])
    _start_early([pdf], Settings(pdf_reader="fast"))
    _early_extractions_done()
    make_pdf(pdf, ["Granite is an igneous rock."])
    try:
        assert "Granite is an igneous rock." == extract_isolated(pdf, Settings()).text
    finally:
        drop_early_extractions()


def test_an_early_extraction_whose_worker_crashed_fails_its_task_as_crashed(slow_pdf):
    stop_workers()
    _start_early([slow_pdf], Settings(pdf_reader="fast"))
    for pid in _busy_workers():
        os.kill(pid, signal.SIGKILL)
    with pytest.raises(ExtractionError) as caught:
        extract_isolated(slow_pdf, Settings(pdf_reader="fast"))
    assert "extraction crashed (killed by SIGKILL)" == caught.value.reason


def test_an_early_extraction_past_its_tasks_deadline_times_out_and_its_worker_ends(slow_pdf):
    stop_workers()
    fast = Settings(pdf_reader="fast")
    _start_early([slow_pdf], fast)
    busy = _busy_workers()
    with pytest.raises(DocumentTimeoutError):
        extract_isolated(slow_pdf, fast, Deadline(str(slow_pdf), time.monotonic() + 0.5, 0.5))
    assert _ended(busy)


def test_early_extractions_no_task_took_are_ended_with_their_workers(slow_pdf, tmp_path):
    stop_workers()
    good = make_pdf(tmp_path / "good.pdf", ["Basalt is a volcanic rock."])
    _start_early([slow_pdf, good], Settings(pdf_reader="fast", extract_workers=1))
    busy = _busy_workers()
    drop_early_extractions()
    assert (True, {}) == (_ended(busy), isolated._early)


def test_an_early_extraction_past_its_own_time_limit_fails_a_caller_without_deadline(slow_pdf):
    stop_workers()
    limited = Settings(pdf_reader="fast", document_timeout_s=0.5)
    _start_early([slow_pdf], limited)
    with pytest.raises(DocumentTimeoutError) as caught:
        extract_isolated(slow_pdf, limited)
    assert "timed out: not done within document_timeout_s=0.5 s (extraction)" == caught.value.reason


@pytest.mark.prefect
def test_a_pdf_stuck_in_its_early_extraction_is_failed_timed_out_and_no_worker_is_left(
        slow_pdf, tmp_path, monkeypatch, capsys):
    # The CLI hands the PDF to a worker before Prefect starts; the run reports its timeout as
    # it would had the extract task started the extraction.
    monkeypatch.setenv("PROPDEX_LLM", "offline")
    monkeypatch.setenv("PROPDEX_DOCUMENT_TIMEOUT_S", "1")
    stop_workers()
    code = main(["ingest", str(slow_pdf), "--db", str(tmp_path / "db"), "--pdf-reader", "fast",
                 "--json"])
    [document] = json.loads(capsys.readouterr().out)["documents"]
    idle = {worker.process.pid for worker in isolated._idle}
    assert (1, "timeout", "timed out: not done within document_timeout_s=1 s (extraction)") == (
        code, document["error_kind"], document["error"])
    assert ({}, set()) == (isolated._early, _extraction_workers() - idle)
