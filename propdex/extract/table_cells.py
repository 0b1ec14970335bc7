"""Table cells one printed phrase spans: a group header over two columns ("BLEU" over EN-DE
and EN-FR), a value centred across columns, a note run across a row.

The layout engine's table grid cuts such a phrase at its column boundaries ("BL" | "EU",
"Training C" | "ost (FLOPs)", "3.3 ·" | "10^18"), so that no cell says anything and the
offline propositions name columns "BL EN-DE" and "EU EN-FR". A boundary is crossed by a
phrase when a word straddles it, or when the words either side of it are no more than a
word space apart. The pieces are joined back into the first cell of the span; in the header
row the phrase names every column under it, so each of them gets it.

PyMuPDF's ``pymupdf.table.resolve_spans`` resolves such spans too, from one signal: a single
text span of the page crossing the column line by more than 2 points and 15% of the cell.
On the corpus that misses a value set in several fonts, as formulas are ("3.3 ·" then " 10"
and a raised "18", in attention's Table 2), and joins a contents line's title with its page
number, which a run of tab and spaces puts in one span (mck_energy, page 2); bench/RESULTS.md
has the rows. Words and their gaps tell both apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Rect = tuple[float, float, float, float]
# A word as PyMuPDF's ``get_text("words")`` gives it: (x0, y0, x1, y1, text, ...).
Word = tuple

# Words closer than this share of their height are one phrase. On the corpus's tables a word
# space is 0.24-0.28 of the height, the narrowest column gap 0.89.
MAX_WORD_GAP = 0.5
# Points a word may overhang a cell edge and still lie within the cell.
EDGE_TOLERANCE = 1.0


def boundary_joiner(left: Rect, right: Rect, left_text: str, right_text: str,
                    words: Sequence[Word]) -> str | None:
    """How the texts of two neighbouring cells join when one phrase crosses the boundary
    between them: "" when the grid cut a word ("BL" | "EU"), " " when it cut between words;
    None when the boundary is a column gap (no word straddles it and the words either side
    are further apart than a word space)."""
    x = left[2]
    top, bottom = max(left[1], right[1]), min(left[3], right[3])
    row = [w for w in words
           if top <= (w[1] + w[3]) / 2 <= bottom and w[2] > left[0] and w[0] < right[2]]
    straddling = [w[4] for w in row if w[0] < x - EDGE_TOLERANCE and w[2] > x + EDGE_TOLERANCE]
    if straddling:
        # The grid cuts by character position: a word over the line may have landed whole
        # on one side ("tead of" | "sinusoi"), or be cut ("posi" | "tional e" | "mbedd").
        cut = (left_text.split() or [""])[-1] + (right_text.split() or [""])[0]
        return "" if any(cut in word for word in straddling) else " "
    before = [w for w in row if w[2] <= x + EDGE_TOLERANCE]
    after = [w for w in row if w[0] >= x - EDGE_TOLERANCE]
    if not before or not after:
        return None
    last = max(before, key=lambda w: w[2])
    first = min(after, key=lambda w: w[0])
    height = min(last[3] - last[1], first[3] - first[1])
    return " " if first[0] - last[2] < MAX_WORD_GAP * height else None


def _joiner(texts: Sequence[str | None], rects: Sequence[Rect | None], n: int,
            words: Sequence[Word]) -> str | None:
    left, right = rects[n], rects[n + 1]
    left_text, right_text = (texts[n] or "").strip(), (texts[n + 1] or "").strip()
    # An empty side holds no piece of a cut phrase (a word overhanging into an empty cell
    # stays where it is); a cell of several lines would join its pieces in the wrong place.
    if (left is None or right is None or not left_text or not right_text
            or "\n" in left_text + right_text):
        return None
    return boundary_joiner(left, right, left_text, right_text, words)


@dataclass(frozen=True)
class SpannedPhrase:
    """Cells ``first`` to ``last`` of a row hold one printed phrase: ``text`` is their
    pieces joined back."""

    first: int
    last: int
    text: str


def spanned_phrases(texts: Sequence[str | None], rects: Sequence[Rect | None],
                    words: Sequence[Word]) -> list[SpannedPhrase]:
    """The phrases of a row the grid cut at a column line, each over two or more cells."""
    phrases = []
    n = 0
    while n < len(texts) - 1 and n < len(rects) - 1:
        parts = [(texts[n] or "").strip()]
        end = n
        while end + 1 < min(len(texts), len(rects)) and (
                joiner := _joiner(texts, rects, end, words)) is not None:
            parts += [joiner, (texts[end + 1] or "").strip()]
            end += 1
        if end > n:
            phrases.append(SpannedPhrase(n, end, "".join(parts).strip()))
        n = end + 1
    return phrases
