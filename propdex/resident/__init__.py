"""The resident index: an index's live rows in memory, searched without LanceDB queries.

A long-running reader (`propdex serve`, `propdex mcp`, or ``open_index(..., resident=True)``)
loads the live chunks and propositions once, then keeps them current with each commit.
propdex.search runs unchanged over it: ``ResidentView`` answers the same ranking calls as
LanceDB does (propdex.store.ranking), with the same cosine and BM25 scores.
"""

from propdex.resident.index import ResidentIndex
from propdex.resident.view import ResidentView

__all__ = ["ResidentIndex", "ResidentView"]
