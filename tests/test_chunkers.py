"""The fixed, passages, semantic and llm chunkers: exact spans, their rules, the factory."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flows.parameters import IngestOptions
from propdex.chunking import RecursiveChunker, chunk_and_count, chunk_document, make_chunker
from propdex.chunking.fixed import FixedChunker
from propdex.chunking.llm import (
    MARKER,
    LLMChunker,
    logprob_cuts,
    make_windows,
    marked_copy_cuts,
    word_start_at_or_after,
)
from propdex.chunking.passages import PassageChunker
from propdex.chunking.semantic import SemanticChunker
from propdex.chunking.sentences import sentence_spans
from propdex.cli import build_parser, ingest_options
from propdex.embed import make_embedder
from propdex.extract import extract_document
from propdex.models import Usage
from propdex.settings import Settings
from tests.scripted_fixtures import scripted_settings
from tests.scripted_server import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    estimate_tokens,
    prompt_tokens_of,
    reply,
    truncated,
)

PARAGRAPHS = (
    "Alpha one is here. Alpha two follows it.\n\n"
    "Beta one starts the second paragraph. Beta two ends it.\n\n"
    "Gamma one is last."
)


def pieces(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[start:end] for start, end in spans]


# --- fixed ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size", "overlap", "expected"),
    [
        ("", 10, 0, []),
        ("abcdefghijklmnopqrstuvwxy", 10, 0, ["abcdefghij", "klmnopqrst", "uvwxy"]),
        ("abcdefghijklmnopqrstuvwxy", 10, 4, ["abcdefghij", "ghijklmnop", "mnopqrstuv", "stuvwxy"]),
        ("  ab cd  ef gh   ", 6, 0, ["ab c", "d  ef", "gh"]),  # words cut, whitespace trimmed
    ],
)
def test_fixed_windows(text: str, size: int, overlap: int, expected: list[str]) -> None:
    assert expected == pieces(text, FixedChunker(size, overlap).split(text))


def test_fixed_windows_follow_the_notebook_step() -> None:
    text = "x" * 2000
    assert [0, 700, 1400] == [start for start, _ in FixedChunker(800, 100).split(text)]


# --- sentences and passages ----------------------------------------------------------------


def test_wrapped_lines_do_not_end_sentences() -> None:
    text = "1. RISK OF LOSS\nAll purchases are made under a shipment contract which\nsays so. Risk passes."
    expected = ["1. RISK OF LOSS", "All purchases are made under a shipment contract which\nsays so.",
                "Risk passes."]
    assert expected == pieces(text, sentence_spans(text))


def sentence_text(words: int, tag: str) -> str:
    return " ".join([tag] * (words - 1)) + " end."


@pytest.mark.parametrize(
    ("sentence_words", "expected_words"),
    [
        ([40, 40, 60], [80, 60]),  # 140 words would exceed 100: the third starts a passage
        ([60, 60, 60], [60, 60, 60]),  # tails of 50 words or more stand alone
        ([40, 40, 40], [120]),  # the 40-word tail joins the passage before it
        ([120], [120]),  # one long sentence is one passage
    ],
)
def test_passages_cut_at_sentences_with_tail_merge(
    sentence_words: list[int], expected_words: list[int]
) -> None:
    text = " ".join(sentence_text(n, f"w{i}") for i, n in enumerate(sentence_words))
    spans = PassageChunker(max_chars=10_000).split(text)
    assert expected_words == [len(piece.split()) for piece in pieces(text, spans)]


def test_passage_sentence_longer_than_chunk_size_is_cut() -> None:
    text = "word " * 300 + "end."
    spans = PassageChunker(max_chars=400).split(text)
    assert all(end - start <= 400 for start, end in spans)


# --- semantic ------------------------------------------------------------------------------

TOPICS = (
    "Bake the bread at two hundred degrees for forty minutes. Knead the dough until it is "
    "smooth and elastic. Let the dough rise in a warm kitchen for an hour. The telescope "
    "observed a distant galaxy cluster. Astronomers measured the redshift of the faint quasar."
)


def test_semantic_chunks_split_where_the_topic_changes() -> None:
    chunker = SemanticChunker(make_embedder(Settings()), threshold=0.1, chunk_size=800)
    first, second = pieces(TOPICS, chunker.split(TOPICS))
    assert (True, True) == (first.endswith("for an hour."), second.startswith("The telescope"))


def test_semantic_chunks_stay_within_chunk_size() -> None:
    chunker = SemanticChunker(make_embedder(Settings()), threshold=-1.0, chunk_size=120)
    assert all(end - start <= 120 for start, end in chunker.split(TOPICS))


# --- properties shared by the offline chunkers --------------------------------------------

TEXTS = st.text(alphabet="abc .\n", max_size=400) | st.text(max_size=300)
OFFLINE = [FixedChunker(60, 10), FixedChunker(50, 0), PassageChunker(max_words=12, min_tail_words=5, max_chars=80)]


@pytest.mark.parametrize("chunker", OFFLINE, ids=lambda c: type(c).__name__)
@given(text=TEXTS)
def test_offline_spans_are_exact_ordered_and_cover_the_text(chunker, text: str) -> None:
    spans = chunker.split(text)
    covered = bytearray(len(text))
    for start, end in spans:
        covered[start:end] = b"\x01" * (end - start)
    uncovered = [c for i, c in enumerate(text) if not covered[i] and not c.isspace()]
    trimmed = all(p and p == p.strip() for p in pieces(text, spans))
    ordered = all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(spans))
    assert (True, True, []) == (trimmed, ordered, uncovered)


# --- llm: alignment, windows, log-probabilities ---------------------------------------------

ORIGINAL = "First part here.\nSecond part there. Third part."


@pytest.mark.parametrize(
    ("copy", "expected"),
    [
        (f"First part here.\n{MARKER}Second part there. {MARKER}Third part.", [17, 36]),
        (f"First part here. {MARKER}Second  part there.\n\n{MARKER}Third part.", [17, 36]),  # whitespace aside
        (f"{MARKER}First part here.\nSecond part there. Third part.{MARKER}", []),  # edges are no cuts
        (f"First part here.{MARKER}\nSecond part there. Third part.", [17]),  # moved to the word start
        (f"First part here.\n{MARKER}Second part there! {MARKER}Third part.", None),  # a changed character
        (f"First part here.\n{MARKER}Second part there.", None),  # a dropped sentence
    ],
)
def test_marked_copy_is_trusted_only_when_verbatim(copy: str, expected: list[int] | None) -> None:
    assert expected == marked_copy_cuts(ORIGINAL, copy)


def test_windows_overlap_and_own_disjoint_parts_covering_the_text() -> None:
    text = " ".join(f"word{i}" for i in range(600))
    windows = make_windows(text, 1000, 200)
    owned = [(w.own_start, w.own_end) for w in windows]
    starts_after_previous_end = all(b.start < a.end for a, b in pairwise(windows))
    tiled = [0, *(end for _, end in owned)] == [*(start for start, _ in owned), len(text)]
    assert (True, True, True) == (len(windows) > 2, starts_after_previous_end, tiled)


def test_logprob_cuts_read_the_marker_before_copy_tokens() -> None:
    window = "One sentence. Two sentence."
    offsets = [0, 5, 6, 10, 19, 23]  # "Copy:", " One", " sentence.", ... (copy starts at 6)
    top = [{}, {}, {}, {}, {MARKER: -0.5}, {MARKER: -9.0}]
    assert [14] == logprob_cuts(window, offsets, top, copy_offset=len("Copy: "))


@pytest.mark.parametrize(("position", "expected"), [(0, 0), (3, 4), (4, 4), (5, 9), (9, 9)])
def test_word_start_at_or_after(position: int, expected: int) -> None:
    assert expected == word_start_at_or_after("abc defgh", position)


def llm_settings(server, tmp_path: Path, **overrides) -> Settings:
    return scripted_settings(server, chunker="llm", db=str(tmp_path / "db"), **overrides)


def test_llm_chunks_follow_a_verbatim_copy(scripted_server, tmp_path: Path) -> None:
    scripted_server.script(
        reply(PARAGRAPHS.replace("Beta one", MARKER + "Beta one").replace("Gamma", MARKER + "Gamma")),
        step="llm_chunk",
    )
    spans = LLMChunker(llm_settings(scripted_server, tmp_path)).split(PARAGRAPHS)
    assert ["Alpha one is here. Alpha two follows it.", "Beta one starts the second paragraph. Beta two ends it.",
            "Gamma one is last."] == pieces(PARAGRAPHS, spans)


@pytest.mark.parametrize(
    "action",
    [reply(PARAGRAPHS.replace("Beta one", MARKER + "Beta 1")), truncated()],
    ids=["changed", "cut-off"],
)
def test_llm_window_not_copied_verbatim_is_split_recursively(scripted_server, tmp_path: Path, action) -> None:
    scripted_server.script(action, step="llm_chunk")
    settings = llm_settings(scripted_server, tmp_path, chunk_size=60)
    expected = RecursiveChunker(60).split(PARAGRAPHS)
    assert expected == LLMChunker(settings).split(PARAGRAPHS)


def test_llm_long_text_goes_in_windows_and_keeps_exact_offsets(scripted_server, tmp_path: Path) -> None:
    text = "\n\n".join(f"Paragraph {i} says one thing about topic {i}. It ends here." for i in range(80))
    settings = llm_settings(scripted_server, tmp_path, llm_chunk_window=1000, llm_chunk_window_overlap=200)
    spans = LLMChunker(settings).split(text)
    expected = [f"Paragraph {i} says one thing about topic {i}. It ends here." for i in range(80)]
    assert (expected, len(make_windows(text, 1000, 200))) == (
        pieces(text, spans), scripted_server.calls("llm_chunk"))


def test_llm_answers_are_cached(scripted_server, tmp_path: Path) -> None:
    settings = llm_settings(scripted_server, tmp_path)
    first = LLMChunker(settings).split(PARAGRAPHS)
    second = LLMChunker(settings).split(PARAGRAPHS)
    assert (first, 1) == (second, scripted_server.calls("llm_chunk"))


def test_llm_logprob_variant_cuts_where_the_marker_is_likely(scripted_server, tmp_path: Path) -> None:
    wanted = [PARAGRAPHS.index("Beta one"), PARAGRAPHS.index("Gamma")]

    def scorer(prompt: str, offset: int) -> dict[str, float]:
        copy_start = len(prompt) - len(PARAGRAPHS)
        word = word_start_at_or_after(prompt, offset) - copy_start
        return {MARKER: -0.2} if offset >= copy_start and word in wanted else {}

    scripted_server.prompt_scorer = scorer
    spans = LLMChunker(llm_settings(scripted_server, tmp_path, llm_chunk_logprobs=True)).split(PARAGRAPHS)
    assert ([0, *wanted], 1) == ([s for s, _ in spans], scripted_server.calls(path=COMPLETIONS_PATH))


def test_llm_chunker_matches_the_gold_segmentation(scripted_server, tmp_path: Path, corpus: Path) -> None:
    text = (corpus / "llama-chunk" / "example_input.txt").read_text()
    gold = (corpus / "llama-chunk" / "example_output.txt").read_text()
    copy = gold.replace("{BIG_SPLIT_TOKEN}", MARKER).replace("{SMALL_SPLIT_TOKEN}", MARKER)
    scripted_server.script(reply(copy), step="llm_chunk")
    spans = LLMChunker(llm_settings(scripted_server, tmp_path)).split(text)
    assert marked_copy_cuts(text, copy) == [start for start, _ in spans[1:]]


# --- selection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [("fixed", FixedChunker), ("recursive", RecursiveChunker), ("passages", PassageChunker),
     ("semantic", SemanticChunker)],
)
def test_settings_select_the_chunker(name: str, kind: type) -> None:
    assert kind is type(make_chunker(Settings(chunker=name)))


def test_llm_chunker_needs_an_llm() -> None:
    with pytest.raises(ValueError, match="needs an LLM"):
        Settings(chunker="llm")


@pytest.mark.parametrize(
    ("changed", "same"),
    [
        ({"chunker": "passages"}, False),
        ({"chunker": "semantic", "semantic_threshold": 0.4}, False),
        ({"sectioning": True}, False),
        ({"semantic_threshold": 0.4}, True),  # not used by the recursive chunker
        ({"llm_chunk_window": 9000}, True),
    ],
)
def test_chunking_settings_enter_the_fingerprint(changed: dict, same: bool) -> None:
    versions = {"title": "t1"}
    assert same == (Settings().fingerprint(versions) == Settings(**changed).fingerprint(versions))


@pytest.mark.parametrize(
    ("flags", "environment", "expected"),
    [([], None, False), (["--sectioning"], None, True), ([], "true", True),
     (["--no-sectioning"], "true", False)],
)
def test_cli_sectioning_flag_reaches_the_settings(monkeypatch, flags: list[str], environment: str | None,
                                                  expected: bool) -> None:
    if environment is not None:
        monkeypatch.setenv("PROPDEX_SECTIONING", environment)
    args = build_parser().parse_args(["ingest", "docs", *flags])
    assert expected == ingest_options(args).settings("db").sectioning


def test_cli_and_flow_parameters_carry_the_chunker() -> None:
    args = build_parser().parse_args(["ingest", "docs", "--chunker", "passages"])
    settings = IngestOptions(chunker=args.chunker).settings("db")
    assert "passages" == settings.chunker


def test_chunk_records_keep_exact_offsets_for_every_offline_chunker(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\n" + PARAGRAPHS + "\n\n## More\n\n" + TOPICS)
    doc = extract_document(str(path), Settings())
    exact = {
        name: all(c.text == doc.text[c.char_start : c.char_end]
                  for c in chunk_document(doc, Settings(chunker=name, chunk_size=100)))
        for name in ("fixed", "recursive", "passages", "semantic")
    }
    assert dict.fromkeys(exact, True) == exact


# --- LLM usage of chunking and sectioning --------------------------------------------------

# Twenty paragraphs (about 1,100 characters): two llm chunker windows of 1,000.
NOTES = "\n\n".join(f"Note {i} records one fact about item {i}. It stops here." for i in range(20))


def billed(server) -> tuple[int, int]:
    """LLM requests the server answered (embeddings aside) and the prompt tokens it billed."""
    requests = [r for r in server.requests if r.path in (CHAT_PATH, COMPLETIONS_PATH)]
    tokens = sum(prompt_tokens_of(r.body) if r.path == CHAT_PATH else estimate_tokens(r.body["prompt"])
                 for r in requests)
    return len(requests), tokens


def notes_document(tmp_path: Path, settings: Settings):
    path = tmp_path / "notes.txt"
    path.write_text(NOTES)
    return extract_document(str(path), settings)


@pytest.mark.parametrize("logprobs", [False, True], ids=["copy", "logprobs"])
def test_chunking_usage_is_what_the_server_billed(scripted_server, tmp_path: Path, logprobs: bool) -> None:
    settings = llm_settings(scripted_server, tmp_path, sectioning=True, llm_chunk_logprobs=logprobs,
                            llm_chunk_window=1000, llm_chunk_window_overlap=200)
    usage = chunk_and_count(notes_document(tmp_path, settings), settings).usage
    assert billed(scripted_server) == (usage.calls, usage.prompt_tokens)


def test_cached_chunking_answers_count_as_cached_calls(scripted_server, tmp_path: Path) -> None:
    settings = llm_settings(scripted_server, tmp_path, sectioning=True, llm_chunk_window=1000,
                            llm_chunk_window_overlap=200)
    doc = notes_document(tmp_path, settings)
    first = chunk_and_count(doc, settings).usage
    assert Usage(cached_calls=first.calls) == chunk_and_count(doc, settings).usage


def test_offline_chunking_costs_no_llm_call(tmp_path: Path) -> None:
    settings = Settings(sectioning=True)
    assert Usage() == chunk_and_count(notes_document(tmp_path, settings), settings).usage
