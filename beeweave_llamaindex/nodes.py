"""``SearchHit`` -> LlamaIndex ``NodeWithScore``."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, TextNode

from beeweave_core import SearchHit

__all__ = ["hit_to_node"]

# The metadata an LLM (or a re-embedding) sees with the text; the rest is bookkeeping
# that would only crowd the prompt.
_SHOWN = frozenset({"timestamp", "tags"})


def hit_to_node(hit: SearchHit, score: float | None = None) -> NodeWithScore:
    """A new node for a memory: id and text from the chunk, every other field (JSON-friendly),
    the hit's sources (which retriever or graph edge reached it), ``loosened`` and
    ``rank_score`` (the fused score that ranked it, meaningful within one search) as metadata.

    The node's score is the hit's calibrated relevance (``SearchHit.relevance``, in [0, 1] and
    comparable across searches, so ``SimilarityPostprocessor(similarity_cutoff=...)`` reads it
    as a similarity), or ``score`` when given (a hit with no relevance)."""
    data = hit.to_dict()
    chunk = data["chunk"]
    node_id, text = chunk.pop("id"), chunk.pop("raw_content")
    metadata = {**chunk, "sources": data["sources"], "loosened": data["loosened"], "rank_score": float(hit.score),
                "superseded": hit.superseded}
    hidden = [k for k in metadata if k not in _SHOWN]
    node = TextNode(id_=node_id, text=text, metadata=metadata,
                    excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=list(hidden))
    if score is None and hit.relevance is not None:
        score = float(hit.relevance)
    return NodeWithScore(node=node, score=score)
