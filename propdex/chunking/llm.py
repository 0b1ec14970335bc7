"""LLM chunking (LlamaChunk): the LLM marks where chunks begin; propdex never trusts its text.

Copy mode asks the model to repeat each window of the text with the split marker inserted.
The copy is aligned with the original character by character (whitespace aside): if the
non-whitespace characters match exactly, each marker maps to an offset in the original; if
not (a changed, dropped or invented character, a copy cut off at the token limit), the
window is split by the recursive chunker instead and a warning names the window. Chunk
text always comes from the original, so offsets stay exact either way.

Log-probability mode sends one completion prompt per window (the window, then the window
again as the copy) with ``echo`` and ``logprobs`` and reads, at every token of the copy,
the log-probability that the marker would have come next; a chunk starts where it is at
least ``MARKER_MIN_LOGPROB``. Nothing is generated, so nothing can be miscopied.

Long texts go in windows of ``llm_chunk_window`` characters overlapping by
``llm_chunk_window_overlap``; each window decides the cuts in its own part (up to the
middle of each overlap), where it has context on both sides. A chunk longer than
``chunk_size`` is cut further by the recursive chunker, as every chunker's are.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from dataclasses import dataclass

from propdex.cache import cache_key
from propdex.chunking.base import Chunker, trim_span
from propdex.chunking.llm_requests import ChunkingRequests
from propdex.chunking.recursive import RecursiveChunker
from propdex.deadlines import submit_with_deadline
from propdex.llm.prompts import load_prompt
from propdex.models import Usage
from propdex.settings import Settings

log = logging.getLogger("propdex.chunking")

# LlamaChunk's marker: one token in common tokenizers and rare in documents ("section").
MARKER = "段"
MARKER_MIN_LOGPROB = math.log(0.1)
_SPACE = re.compile(r"\s")


@dataclass(frozen=True)
class Window:
    start: int  # the characters sent
    end: int
    own_start: int  # the part whose cuts this window decides
    own_end: int


def make_windows(text: str, size: int, overlap: int) -> list[Window]:
    """Windows of at most ``size`` characters, ending at whitespace where possible, each
    starting ``overlap`` characters (moved to a word start) before the previous one ends."""
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            space = text.rfind(" ", start + size // 2, end)
            newline = text.rfind("\n", start + size // 2, end)
            end = max(space, newline) if max(space, newline) > 0 else end
        spans.append((start, end))
        if end >= len(text):
            break
        following = max(end - overlap, start + 1)
        while following < end and not (text[following - 1].isspace() and not text[following].isspace()):
            following += 1
        start = following
    windows = []
    for i, (start, end) in enumerate(spans):
        own_start = 0 if i == 0 else (spans[i - 1][1] + start) // 2
        own_end = len(text) if i == len(spans) - 1 else (end + spans[i + 1][0]) // 2
        windows.append(Window(start, end, own_start, own_end))
    return windows


def word_start_at_or_after(text: str, position: int) -> int:
    """The first word start at or after ``position`` (len(text) when there is none)."""
    if 0 < position < len(text) and not text[position - 1].isspace() and not text[position].isspace():
        match = _SPACE.search(text, position)
        position = match.start() if match else len(text)
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def marked_copy_cuts(original: str, copy: str, marker: str = MARKER) -> list[int] | None:
    """Offsets in ``original`` where the copy's markers start chunks, or None when the copy
    (markers and whitespace aside) is not the original verbatim."""
    original_chars = [i for i, c in enumerate(original) if not c.isspace()]
    copied: list[str] = []
    marks: list[int] = []  # how many non-whitespace characters precede each marker
    for piece_index, piece in enumerate(copy.split(marker)):
        if piece_index:
            marks.append(len(copied))
        copied.extend(c for c in piece if not c.isspace())
    if "".join(copied) != "".join(original[i] for i in original_chars):
        return None
    cuts = {original_chars[n] for n in marks if 0 < n < len(original_chars)}
    return sorted(word_start_at_or_after(original, cut) for cut in cuts)


def copy_similarity(original: str, copy: str, marker: str = MARKER) -> float:
    """How close a rejected copy came (difflib ratio, whitespace aside), for the warning."""
    strip = lambda s: "".join(s.replace(marker, "").split())  # noqa: E731
    return difflib.SequenceMatcher(None, strip(original), strip(copy), autojunk=False).ratio()


def logprob_cuts(window: str, offsets: list[int], top: list[dict[str, float]], copy_offset: int,
                 marker: str = MARKER, min_logprob: float = MARKER_MIN_LOGPROB) -> list[int] | None:
    """Offsets in ``window`` before which the marker was likely, read from the echoed
    prompt's alternatives; None when the server returned no per-token alternatives."""
    if not offsets or len(offsets) != len(top) or not any(top):
        return None
    cuts = set()
    for offset, alternatives in zip(offsets, top, strict=True):
        position = offset - copy_offset
        if 0 < position < len(window) and alternatives.get(marker, -math.inf) >= min_logprob:
            cuts.add(word_start_at_or_after(window, position))
    return sorted(c for c in cuts if c < len(window))


class LLMChunker(Chunker):
    def __init__(self, settings: Settings):
        self.settings = settings
        self.chunk_size = settings.chunk_size
        self.table_chars = settings.chunk_size
        self.logprobs = settings.llm_chunk_logprobs
        self.step = "llm_chunk_logprobs" if self.logprobs else "llm_chunk"
        self.prompt = load_prompt(self.step)
        self.fallback = RecursiveChunker(settings.chunk_size)
        self.usage = Usage()

    def split(self, text: str) -> list[tuple[int, int]]:
        from propdex.runtime import cache_for, llm_pool  # runtime builds the process-wide pool

        if trim_span(text, 0, len(text)) is None:
            return []
        windows = make_windows(text, self.settings.llm_chunk_window,
                               self.settings.llm_chunk_window_overlap)
        cache = cache_for(self.settings)
        requests = ChunkingRequests(self.settings)
        pool = llm_pool(self.settings)
        # The windows' requests run against the document's deadline, like every LLM call.
        futures = [submit_with_deadline(pool, self._window_cuts, text, w, requests, cache)
                   for w in windows]
        results = [future.result() for future in futures]
        # Summed here, in the calling thread: the windows' threads never share a total.
        self.usage = sum((usage for _, usage in results), self.usage)
        cuts = sorted({c for window_cuts, _ in results for c in window_cuts})
        return self._spans(text, cuts)

    def _window_cuts(self, text: str, window: Window, requests: ChunkingRequests,
                     cache) -> tuple[list[int], Usage]:
        piece = text[window.start : window.end]
        key = cache_key(step=self.step, model=requests.model, prompt=self.prompt.version,
                        target=self.chunk_size, text=piece)
        found = cache.get_llm(key)
        usage = Usage(cached_calls=1)
        if found is None:
            relative, reason, usage = self._ask(piece, requests)
            found = {"cuts": relative, "reason": reason}
            cache.put_llm(key, self.step, found)
        relative = found["cuts"]
        if relative is None:
            log.warning("llm chunker: window at characters %d-%d %s; split recursively instead",
                        window.start, window.end, found["reason"])
            relative = [start for start, _ in self.fallback.split(piece)[1:]]
        absolute = (window.start + cut for cut in relative)
        return [c for c in absolute if window.own_start <= c < window.own_end and c > 0], usage

    def _ask(self, piece: str, requests: ChunkingRequests) -> tuple[list[int] | None, str, Usage]:
        """The window's cuts (None: split it recursively), why not, and the call's usage."""
        if MARKER in piece:
            return None, f"contains the marker {MARKER!r} itself", Usage()
        values = {"marker": MARKER, "target": self.chunk_size, "document": piece}
        if self.logprobs:
            system, user = (m["content"] for m in self.prompt.messages(**values))
            prompt = f"{system}\n\n{user}"
            if not prompt.endswith(piece):
                return None, "changed by prompt quoting (it holds a delimiter tag)", Usage()
            scores = requests.prompt_logprobs(prompt)
            cuts = logprob_cuts(piece, scores.offsets, scores.top, len(prompt) - len(piece))
            reason = "" if cuts is not None else "got no prompt log-probabilities from the server"
            return cuts, reason, scores.usage
        answer = requests.copy(self.prompt.messages(**values), len(piece))
        if answer.cut_off:
            return None, "was copied only in part (the answer hit its output cap)", answer.usage
        cuts = marked_copy_cuts(piece, answer.text)
        if cuts is None:
            similarity = copy_similarity(piece, answer.text)
            return None, f"was not copied verbatim (similarity {similarity:.3f})", answer.usage
        return cuts, "", answer.usage

    def _spans(self, text: str, cuts: list[int]) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
            span = trim_span(text, start, end)
            if span is None:
                continue
            if span[1] - span[0] <= self.chunk_size:
                spans.append(span)
            else:
                offset = span[0]
                spans.extend((offset + s, offset + e) for s, e in self.fallback.split(text[span[0]:span[1]]))
        return spans
