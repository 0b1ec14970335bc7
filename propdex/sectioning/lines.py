"""The document as numbered lines: what the sectioning LLM reads and answers about."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lines:
    starts: list[int]  # character offset of each line in the text
    text: str

    @classmethod
    def of(cls, text: str) -> Lines:
        starts = [0]
        starts.extend(i + 1 for i, c in enumerate(text) if c == "\n" and i + 1 < len(text))
        return cls(starts, text)

    def __len__(self) -> int:
        return len(self.starts)

    def end(self, line: int) -> int:
        """Offset just past ``line`` (its newline included)."""
        return self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)

    def chars(self, first: int, last: int) -> int:
        """Non-whitespace characters on lines ``first``..``last``."""
        piece = self.text[self.starts[first] : self.end(last)]
        return len(piece) - sum(c.isspace() for c in piece)

    def numbered(self, first: int, last: int) -> str:
        """Lines ``first``..``last``, each prefixed with "[n] "."""
        return "".join(
            f"[{n}] {self.text[self.starts[n] : self.end(n)].rstrip()}\n" for n in range(first, last + 1)
        )

    def last_within(self, first: int, max_chars: int) -> int:
        """The last line from ``first`` on such that the lines fit in ``max_chars`` (one at least)."""
        limit = self.starts[first] + max_chars
        last = first
        while last + 1 < len(self.starts) and self.end(last + 1) <= limit:
            last += 1
        return last
