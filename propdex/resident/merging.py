"""When and how a table's segments are merged: in the background, never in a search's way.

Every commit adds a segment (its documents' new rows) and masks rows in older ones. Segments
cost each ranking a matrix product and a few lookups, and masked rows cost memory, so
segments are merged by a binary-counter rule: the newest segment is merged into the one
before it while it holds at least half as many live rows. A row is then rebuilt about
log2(rows) times over its life, however many commits come, and a table keeps a handful of
segments. Below SMALL_SEGMENT_ROWS live rows the counter does not wait: the newest segment
joins the small one before it at once, so commits of a few rows each make one segment, not a
dozen -- every segment costs each ranking a function call's worth of NumPy, and beside a
stream of single-document commits a served search spent a quarter to a third more CPU on a
view of four segments (and a few masked rows) than on a fresh one (100k propositions,
bench/RESULTS.md). A segment of which under half the rows are live is rebuilt alone.

A merge only changes how the rows are held, not which rows a view holds, so it is built
outside any lock from one view and swapped into whatever view is current when it is done:
the documents replaced or removed in between are masked in the merged segment.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from propdex.resident.segment import Segment
from propdex.resident.text import TextPostings
from propdex.resident.view import TableState

MAX_SEGMENTS = 12  # beyond this, the smallest adjacent pair is merged whatever the rule
MIN_LIVE_SHARE = 0.5  # a segment with fewer live rows than this share is rebuilt
# Live rows under which a segment takes in the newest at once. Rebuilding one of them costs
# at most ~30 ms (1,024 rows: their postings, an exact vector matrix, no sketch), once per
# refresh, against the 0.1-0.2 ms each extra segment costs every search.
SMALL_SEGMENT_ROWS = 1_024


def merge_plan(state: TableState) -> tuple[int, int] | None:
    """The range [start, end) of segments to merge next, or None."""
    live = [int(np.count_nonzero(mask)) for mask in state.alive]
    for number, mask in enumerate(state.alive):
        if len(mask) and live[number] < MIN_LIVE_SHARE * len(mask):
            return number, number + 1
    if len(live) >= 2 and (2 * live[-1] >= live[-2] or live[-2] < SMALL_SEGMENT_ROWS):
        return len(live) - 2, len(live)
    if len(live) > MAX_SEGMENTS:
        pairs = [live[i] + live[i + 1] for i in range(len(live) - 1)]
        start = int(np.argmin(pairs))
        return start, start + 2
    return None


def merged_segment(state: TableState, start: int, end: int, *, key: str,
                   exact: bool) -> Segment | None:
    """One segment of the live rows of segments [start, end); None when none is live."""
    parts = list(zip(state.segments[start:end], state.alive[start:end], strict=True))
    # "default" promotion: a column an older index lacked (null-typed in the segments read
    # before an ingest added it) merges with the typed one.
    rows = pa.concat_tables([segment.table.filter(pa.array(mask)) for segment, mask in parts],
                            promote_options="default")
    if not rows.num_rows:
        return None
    vectors = np.concatenate([segment.vectors.in_row_order()[mask] for segment, mask in parts])
    # The postings of the parts' live rows, merged rather than analyzed again.
    text = TextPostings.merged([(segment.text, mask) for segment, mask in parts])
    return Segment(rows, vectors, key=key, exact=exact, text=text)


def swapped(current: TableState, start: int, end: int, merged: Segment | None,
            gone: list[str]) -> TableState:
    """``current`` with segments [start, end) replaced by ``merged``, whose rows of the
    ``gone`` documents (replaced or removed since the merge began) are masked."""
    segments = list(current.segments[:start])
    alive = list(current.alive[:start])
    if merged is not None:
        mask = np.ones(merged.rows, dtype=bool)
        mask[merged.documents_mask(gone)] = False
        segments.append(merged)
        alive.append(mask)
    segments += current.segments[end:]
    alive += current.alive[end:]
    return TableState.of(segments, alive)
