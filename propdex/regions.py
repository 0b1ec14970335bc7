"""Page regions of stored text: which rectangles of which pages a span of text came from.

Extraction records ``TextRegion``s (a character range of the stored text, the page rectangle
it was read from and the layout block it belongs to); a chunk, a proposition or a table row
gets its boxes with ``boxes_for_span``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from propdex.models import PageBox, TextRegion


def boxes_for_span(regions: Sequence[TextRegion], start: int, end: int) -> list[PageBox]:
    """The page rectangles of the text ``[start, end)``: one per layout block it overlaps,
    the union of the block's regions it overlaps (the rows of a table it covers, for
    instance), in reading order. ``regions`` are sorted by start and do not overlap."""
    if not regions or end <= start:
        return []
    # Regions ending at or before ``start`` cannot overlap; they are sorted by start, and
    # non-overlapping, so their ends are sorted too.
    first = bisect.bisect_right([r.end for r in regions], start)
    merged: dict[tuple[int, int], PageBox] = {}
    for region in regions[first:]:
        if region.start >= end:
            break
        box = region.box
        key = (box.page, region.block)
        known = merged.get(key)
        merged[key] = box if known is None else PageBox(
            page=box.page, x0=min(known.x0, box.x0), y0=min(known.y0, box.y0),
            x1=max(known.x1, box.x1), y1=max(known.y1, box.y1),
        )
    return list(merged.values())


def boxes_as_rows(boxes: Sequence[PageBox]) -> list[dict] | None:
    """Boxes as stored in the ``boxes`` column (None when there are none: non-PDF sources)."""
    if not boxes:
        return None
    return [
        {"page": b.page, "x0": b.x0, "y0": b.y0, "x1": b.x1, "y1": b.y1} for b in boxes
    ]
