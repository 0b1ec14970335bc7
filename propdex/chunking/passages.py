"""~100-word passages cut only at sentence ends (Dense X Retrieval, appendix A).

Sentences are added one by one; when the next one would take the passage over
``max_words`` words, it starts a new passage; a final passage under ``min_tail_words``
words is merged into the one before. Dense X applies this to each Wikipedia paragraph; PDF
text has no reliable paragraphs (wrapped lines, captions, running heads), so propdex applies
it to each section (chunk_document splits documents at section starts). A single sentence
longer than ``max_chars`` (a table flattened to one line) is cut by the recursive chunker.
"""

from __future__ import annotations

from propdex.chunking.base import Chunker
from propdex.chunking.recursive import RecursiveChunker
from propdex.chunking.sentences import sentence_spans

PASSAGE_WORDS = 100
MIN_TAIL_WORDS = 50


def bounded_sentences(text: str, max_chars: int) -> list[tuple[int, int]]:
    """Sentence spans of ``text``, any longer than ``max_chars`` cut recursively."""
    spans: list[tuple[int, int]] = []
    splitter: RecursiveChunker | None = None
    for start, end in sentence_spans(text):
        if end - start <= max_chars:
            spans.append((start, end))
            continue
        splitter = splitter or RecursiveChunker(max_chars)
        spans.extend((start + s, start + e) for s, e in splitter.split(text[start:end]))
    return spans


class PassageChunker(Chunker):
    def __init__(self, max_words: int = PASSAGE_WORDS, min_tail_words: int = MIN_TAIL_WORDS,
                 max_chars: int = 800):
        if not 0 <= min_tail_words <= max_words:
            raise ValueError(f"min_tail_words must be in [0, {max_words}], got {min_tail_words}")
        self.max_words = max_words
        self.min_tail_words = min_tail_words
        self.max_chars = max_chars
        self.table_chars = max_chars

    def split(self, text: str) -> list[tuple[int, int]]:
        passages: list[tuple[int, int]] = []
        words: list[int] = []  # word count of each passage
        for start, end in bounded_sentences(text, self.max_chars):
            count = len(text[start:end].split())
            if passages and words[-1] + count <= self.max_words:
                passages[-1] = (passages[-1][0], end)
                words[-1] += count
            else:
                passages.append((start, end))
                words.append(count)
        if len(passages) > 1 and words[-1] < self.min_tail_words:
            tail = passages.pop()
            passages[-1] = (passages[-1][0], tail[1])
        return passages
