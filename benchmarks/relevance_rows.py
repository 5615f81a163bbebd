"""Each hit of a search with the evidence calibrated relevance reads, as the engine reads it.

Shared by ``abstention.py`` (LoCoMo's questions) and ``paraphrases.py`` (the paraphrase
development set), which both fit or check the relevance curve on these rows.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.filters import build_filter  # noqa: E402
from beeweave_core.query import prepare_query  # noqa: E402
from beeweave_core.relevance import (  # noqa: E402
    BACKGROUND,
    lexical_evidence,
    mean_cosine,
    semantic_leads,
    term_coverage,
    top_cosines,
)
from beeweave_core.timewords import find_time  # noqa: E402

__all__ = ["K", "evidence_rows"]

K = 10


def evidence_rows(memory: BeeWeave, user: str, query: str) -> list[dict[str, Any]]:
    """The top ``K`` hits of ``query`` in ``user``'s memory, the gate off, each with its evidence."""
    hits = memory.search(query, user_id=user, k=K, abstain_below=0)  # every hit: the gate is what is measured
    search = memory.parts.search
    # A time phrase ("4 years ago") filtered the search to its range and left the query: read
    # that text's terms in that range, as the engine did.
    flt = build_filter(None, user_id=user)
    used = hits[0].time_range if hits else None  # the range the engine searched, as it searched it
    when = find_time(query, search.shared.clock()) if used is not None else None
    text = when.text if when is not None and when.text.strip() else query
    if used is not None:
        flt = flt.replace(since=used.start, until=used.until)
    prepared = prepare_query(text, search.shared.tokenizer)
    terms = prepared.terms
    qvec = search.embed_query(prepared.text)
    statements = BACKGROUND.cosines(search.shared.embedder, qvec)  # read once, for both, as the engine does
    background = mean_cosine(statements)
    own = {h.id: set(search.shared.tokenizer.tokenize(h.chunk.content)) for h in hits}
    lex = lexical_evidence(search.shared.backend, terms, flt, [h.id for h in hits], own)
    # the lead: each hit's own cosine against the top own cosines of the candidates, as the
    # engine reads them (``Search._own_cosines``: no session neighbours blended in); the word
    # curve's cosine is the ranking's
    ids, scores = search._retrieve(terms, flt, K, qvec)
    cosines = search._own_cosines(None, ids, qvec, scores["vector"])
    top = top_cosines(np.fromiter(cosines.values(), np.float64, len(cosines)))
    near = [h for h in hits if "vector" in h.sources]
    found = iter(semantic_leads(search.shared.backend, search.shared.embedder, [h.id for h in near],
                                [cosines.get(h.id, h.sources["vector"].score) for h in near], top, qvec,
                                background=statements.tolist()))
    out = []
    for h in hits:
        vec, bm = h.sources.get("vector"), h.sources.get("lexical")
        out.append({"id": h.id, "score": h.score, "relevance": h.relevance,
                    "cosine": vec.score if vec else 0.0, "bm25": bm.score if bm else 0.0,
                    "lexical": lex[h.id],
                    "coverage": term_coverage(terms, own[h.id]), "background": background if vec else 0.0,
                    "lead": next(found) if vec else 0.0})
    return out
