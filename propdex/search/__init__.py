"""Search: the search function (propdex.search.query), the rankings it reads from Lance
(propdex.search.rankings), their fusion (propdex.search.fusion), and what a vector ranking
of an index embedded by several models searches (propdex.search.embedders)."""

from propdex.search.fusion import RRF_K, reciprocal_rank_fusion
from propdex.search.query import (
    CHUNK_COLUMNS,
    DEFAULT_K,
    DEFAULT_LEVEL,
    DEFAULT_MODE,
    FUSION_DEPTH,
    PROP_COLUMNS,
    Level,
    Mode,
    SearchResult,
    search,
)

__all__ = [
    "CHUNK_COLUMNS",
    "DEFAULT_K",
    "DEFAULT_LEVEL",
    "DEFAULT_MODE",
    "FUSION_DEPTH",
    "Level",
    "Mode",
    "PROP_COLUMNS",
    "RRF_K",
    "SearchResult",
    "reciprocal_rank_fusion",
    "search",
]
