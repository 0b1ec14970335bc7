"""An index whose live documents were embedded by several models: what a vector ranking
searches, and what every surface is told it left out.

Vectors of two models cannot be compared (both local models give 384 dimensions, so nothing
else would tell). While an ingest with a new embedder re-embeds an index, a vector ranking
with the new model searches the documents already re-embedded (propdex.store.live's
VectorSplit) and the results say how many documents, of which model, it left out; the
full-text rankings still reach every document. Only a search none of whose documents is in
the query's vector space is refused, as an index wholly of another model is.

The other documents are not also searched with their own model: that would load a second
embedder in every reader and embed each query twice for a state that lasts one ingest, and
two vector rankings over disjoint documents, fused by rank, would put the best hit of each
side level whatever their similarity.
"""

from __future__ import annotations

from propdex.errors import EmbedderMismatchError
from propdex.store.live import VectorSplit


def _models(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} with {model!r}" for model, n in sorted(counts.items()))


def vector_left_out(split: VectorSplit, embed_model: str, hybrid: bool) -> dict:
    """The ``vector_left_out`` field of every result of a search that left documents out of
    its vector rankings: how many, which models embedded them, whether full text reached them,
    and the sentence the CLI prints and the reader logs."""
    count = sum(split.left_out.values())
    reached = ("searched by full text only" if hybrid
               else "not searched (a hybrid or full-text search reaches them)")
    warning = (f"{count} of the {split.scope} documents were {reached}: their vectors "
               f"come from another model than this search's {embed_model!r} "
               f"({_models(split.left_out)}), which an ingest with this embedder replaces "
               "document by document")
    return {"documents": count, "embed_models": dict(split.left_out),
            "searched_by_text": hybrid, "warning": warning}


def embedder_mismatch(index_uri: str, embed_model: str, split: VectorSplit,
                      scoped: bool) -> EmbedderMismatchError:
    """The refusal of a vector or hybrid search none of whose documents (``scoped``: of
    those its filters allow) was embedded in ``embed_model``'s vector space."""
    of = f"of the {split.scope} this search's filters allow" if scoped else f"of {split.scope}"
    return EmbedderMismatchError(
        f"the index at {index_uri} holds documents embedded with another model than this "
        f"search's {embed_model!r} ({_models(split.left_out)} {of}): their vectors cannot be "
        "compared. Search with the embedder they were built with (PROPDEX_EMBEDDER, "
        f"PROPDEX_EMBED_MODEL), or re-embed them with this one: `propdex ingest <their "
        f"folders> --db {index_uri}` (LLM answers come from the cache); `--mode fts` "
        "searches meanwhile")
