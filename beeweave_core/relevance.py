"""Calibrated relevance: how likely a hit holds what the query asks, on one fixed scale.

A hit's ``score`` ranks the candidates of one search and means nothing across searches (a
sigmoid of z-scores is 0.5 for a store of one memory, RRF scores are ~0.03, weighted fusion
sums to 2). ``relevance`` is read from evidence that does not depend on the pool or the
fusion mode:

- ``cosine``: the cosine of the query's vector with the memory's (context) vector;
- ``lexical``: the memory's BM25 score over the query's terms divided by the sum of each
  term's best score in the searched scope (the score of a memory that matched every term as
  well as the best memory matched it). Rare terms weigh more, as in BM25; a term every memory
  shares (a speaker's name) weighs little; a term no memory of the scope holds weighs as much
  as the heaviest matched one (the store does not know that part of the question);
- ``coverage``: the share of the query's distinct terms found in the memory's own text (the
  one lexical evidence left in a store of a few memories, where BM25's idf is 0).

They enter one logistic curve whose coefficients are below. With a cross-encoder reranker
its probability (the sigmoid of its logit) is averaged with the curve's (not fitted: no
cross-encoder ships with the library).

How the coefficients were fitted: ``python benchmarks/abstention.py --fit`` on the LoCoMo
development split (``/work/shared/data/locomo``): every question's top 10 hits in its own
conversation (label 1 for an evidence turn, 0 otherwise), the same questions asked of the
other conversations with their speakers' names swapped for this conversation's, and generic
off-topic questions (all hits label 0); scikit-learn's ``LogisticRegression`` with balanced
classes. ``DEFAULT_MIN_RELEVANCE`` is the highest threshold that keeps 95 % of the on-topic
recall@10 there, and ``DEFAULT_ABSTAIN_BELOW`` the highest gate on a search's best hit that
does. Nothing here knows the data: the features are general retrieval evidence.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .embedders import DEFAULT_MODEL_NAME, MINILM_MODEL_NAME
from .store.base import SearchesTermsInOneTrip, TermEvidence

if TYPE_CHECKING:
    from .filters import Filter
    from .store.base import StoreBackend

__all__ = ["BACKGROUND", "Calibration", "calibration_for", "E5_CALIBRATION", "MINILM_CALIBRATION", "UNCALIBRATED", "Evidence",
           "relevance", "lexical_evidence", "evidence_terms", "term_coverage", "term_evidence", "DEFAULT_MIN_RELEVANCE",
           "DEFAULT_ABSTAIN_BELOW", "RELEVANCE_TERMS"]


class Calibration(NamedTuple):
    """One embedding model's relevance curve and its tuned thresholds (a model's cosines have
    their own scale: multilingual-e5-small's unrelated pairs sit near 0.8, MiniLM's near 0.1)."""

    cosine: float
    lexical: float
    coverage: float
    intercept: float
    # The per-hit floor: the highest that keeps 95 % of the on-topic recall@10 when every hit
    # below it is dropped (`min_relevance`; no floor by default).
    min_relevance: float
    # The "nothing relevant" gate (`abstain_below`; not applied by default): a
    # search whose best hit is below it returns nothing, one that has a hit above it returns
    # its hits as ranked (an indirectly useful memory, "allergic to peanuts" for "a dessert
    # for my dinner party", stays beside the relevant one). The highest gate that keeps 95 %
    # of the on-topic recall@10 (a gate loses a query's recall only when it silences the whole
    # query, so it can sit higher than the floor). None: no tuned gate (an uncalibrated model).
    abstain_below: float | None
    # The weight of ``cosine - background`` (0: the curve does not read the background).
    margin: float = 0.0


# Fitted by `python benchmarks/abstention.py --fit` (see the module docstring), all five conversations.
# multilingual-e5-small (the default model), 2026-12-06.
E5_CALIBRATION = Calibration(cosine=13.582, lexical=4.637, coverage=0.950, intercept=-15.722,
                             min_relevance=0.245, abstain_below=0.402, margin=11.439)
# all-MiniLM-L6-v2 (the former default), 2026-12-05.
MINILM_CALIBRATION = Calibration(cosine=4.724, lexical=3.984, coverage=1.381, intercept=-4.866,
                                 min_relevance=0.252, abstain_below=0.421)
# By the names a store records (MiniLM also by its bare name and its int8 variant's).
_CALIBRATIONS = {
    DEFAULT_MODEL_NAME: E5_CALIBRATION,
    MINILM_MODEL_NAME: MINILM_CALIBRATION,
    MINILM_MODEL_NAME.split("/", 1)[1]: MINILM_CALIBRATION,
    MINILM_MODEL_NAME + "@onnx-int8": MINILM_CALIBRATION,
}
# Any other model: MiniLM's curve (cosine-like scales), as a reading, with no tuned gate: a
# threshold means nothing on a scale nobody fitted (the hashing embedder's, a user's model).
UNCALIBRATED = MINILM_CALIBRATION._replace(abstain_below=None)

# The default model's thresholds, by their former names.
DEFAULT_MIN_RELEVANCE = E5_CALIBRATION.min_relevance
DEFAULT_ABSTAIN_BELOW = E5_CALIBRATION.abstain_below


def calibration_for(model: str) -> Calibration:
    """The relevance curve of the embedding model named ``model`` (as a store records it)."""
    return _CALIBRATIONS.get(model, UNCALIBRATED)


# A dialogue query may carry 64 terms; the heaviest this many bound the lexical evidence's cost
# (one index lookup per term).
RELEVANCE_TERMS = 16


class Evidence(NamedTuple):
    """What relevance is read from, each in [0, 1] (cosines in [-1, 1]). ``background``: the
    query's mean cosine with everyday statements that answer nothing (``BACKGROUND.cosine``),
    so that ``cosine - background`` says how much closer the memory is than any memory would
    be: a model whose cosines crowd near 0.8 (multilingual-e5-small) needs that margin, not
    the raw cosine, to tell a paraphrase from an unrelated memory."""

    cosine: float
    lexical: float = 0.0
    coverage: float = 0.0
    background: float = 0.0


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 60.0), -60.0)))


def relevance(evidence: Evidence, cross_encoder: float | None = None,
              calibration: Calibration = E5_CALIBRATION) -> float:
    """The calibrated relevance in [0, 1] of one hit's evidence (``cross_encoder``: its raw
    score) on the curve of ``calibration`` (default: the default model's)."""
    c = calibration
    p = _sigmoid(c.cosine * evidence.cosine + c.lexical * evidence.lexical + c.coverage * evidence.coverage
                 + c.margin * (evidence.cosine - evidence.background) + c.intercept)
    if cross_encoder is not None:
        # A reranker that already outputs a probability is taken as it is; a logit goes through the sigmoid.
        ce = cross_encoder if 0.0 <= cross_encoder <= 1.0 else _sigmoid(cross_encoder)
        p = (p + ce) / 2.0
    return p


class Background:
    """Everyday statements in English and Chinese that answer no particular question
    (``data/background.txt``), embedded once per embedder: a query's mean cosine with them is
    how close any memory is to it (``Evidence.background``)."""

    def __init__(self) -> None:
        self._vectors: dict[int, tuple[object, np.ndarray]] = {}
        self._lock = threading.Lock()

    def cosine(self, embedder: object, query_vector: np.ndarray) -> float:
        key = id(embedder)
        found = self._vectors.get(key)
        if found is None or found[0] is not embedder:
            texts = [line.strip() for line in (Path(__file__).parent / "data" / "background.txt")
                     .read_text(encoding="utf-8").splitlines() if line.strip()]
            vecs = np.asarray(embedder.embed_documents(texts), dtype=np.float32)  # type: ignore[attr-defined]
            with self._lock:
                self._vectors[key] = found = (embedder, vecs)
        vecs = found[1]
        if vecs.shape[1] != len(query_vector):
            return 0.0
        return float(np.mean(vecs @ np.asarray(query_vector, dtype=np.float32)))


BACKGROUND = Background()


def _heaviest(terms: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(terms.items(), key=lambda kv: (-kv[1], kv[0]))[:RELEVANCE_TERMS]


def evidence_terms(terms: Mapping[str, int]) -> list[str]:
    """The query terms the lexical evidence reads (its heaviest), which a backend that answers
    a search in one round trip reads the evidence of (``RetrievesInOneTrip.retrieve``)."""
    return [t for t, _ in _heaviest(terms)]


def term_coverage(terms: Mapping[str, int], own: set[str]) -> float:
    """The share of the query's (heaviest) distinct terms that a memory's own terms ``own`` hold."""
    heaviest = _heaviest(terms)
    if not heaviest:
        return 0.0
    return sum(1 for t, _ in heaviest if t in own) / len(heaviest)


def lexical_evidence(backend: StoreBackend, terms: Mapping[str, int], flt: Filter,
                     ids: Sequence[str], own: Mapping[str, set[str]] | None = None,
                     found: TermEvidence | None = None) -> dict[str, float]:
    """Each id's BM25 score over the query's (heaviest) terms against the sum of each term's
    best score in the scope ``flt``, in [0, 1]. A term no memory in the scope holds counts in
    the denominator as much as the heaviest term that some memory matched: "what is Mel
    allergic to?" asked of memories that never mention an allergy is not answered by one
    that only names Mel, however well it matches the name. ``found``: those scores as the
    search's own round trip read them for ``evidence_terms(terms)`` (PostgreSQL), else they
    are read here.

    Where no term scores at all (a store of one or two memories, or terms every memory has:
    BM25's idf is then 0), ``own`` (each id's own terms) gives the evidence instead: the share
    of the query's terms found in some hit that this hit has. Otherwise "tea" asked of a new
    user's two memories, one about tea, would be no evidence for either."""
    heaviest = _heaviest(terms)
    if not heaviest or not ids:
        return dict.fromkeys(ids, 0.0)
    if found is None:
        found = _read_evidence(backend, heaviest, flt, ids)
    # the same sums, term by term in the same order: the bests are the single-term searches'
    # top scores, the ids' sums their positive per-term scores
    bests = [b for b in (found.best.get(term, 0.0) for term, _ in heaviest) if b > 0.0]
    best_total = sum(bests)
    matched = {cid: found.lexical.get(cid, 0.0) for cid in ids}
    if best_total <= 0.0:
        if own is not None:
            present = [t for t, _ in heaviest if any(t in own.get(cid, ()) for cid in ids)]
            if present:
                return {cid: sum(t in own.get(cid, ()) for t in present) / len(present) for cid in ids}
        return dict.fromkeys(ids, 0.0)
    # A term with no best at all is held by no memory of the scope (a term whose idf fell to
    # zero or below has one, not positive, and is no evidence either way).
    absent = sum(1 for term, _ in heaviest if term not in found.best)
    total = best_total + absent * max(bests)
    return {cid: min(matched[cid] / total, 1.0) for cid in ids}


def _read_evidence(backend: StoreBackend, heaviest: list[tuple[str, int]], flt: Filter,
                   ids: Sequence[str]) -> TermEvidence:
    """Each term's best score in scope, and each id's sum of its positive per-term scores: a
    single-term search per term."""
    counts = dict(heaviest)

    def search(terms: Sequence[str], include: Sequence[str]) -> list[list[tuple[str, float]]]:
        queries = [{t: counts[t]} for t in terms]
        if isinstance(backend, SearchesTermsInOneTrip):  # PostgreSQL: one round trip, not one per term
            return backend.lexical_searches(queries, flt, 1, include=include) if queries else []
        return [backend.lexical_search(q, flt, 1, include=include) for q in queries]

    terms = list(counts)
    return term_evidence(terms, search(terms, ids), ids, lambda unsure: search(unsure, ()))


def term_evidence(terms: Sequence[str], results: Sequence[Sequence[tuple[str, float]]], ids: Sequence[str],
                  alone: Callable[[list[str]], Sequence[Sequence[tuple[str, float]]]]) -> TermEvidence:
    """``TermEvidence`` from each term's single-term search (``lexical_search({term: qtf},
    flt, 1, include=ids)``, aligned with ``terms``): a term's best is its search's top score
    when positive. For the terms whose top is not positive, ``alone`` gives the same searches
    without ``include``: a term found there has its top as its best (it is in scope, its idf
    fell to zero or below: no evidence either way), one not found has none (no memory in
    scope has it, as the search statement of PostgreSQL tells apart). Each id sums its
    positive per-term scores."""
    best: dict[str, float] = {}
    matched = dict.fromkeys(ids, 0.0)
    unsure = []
    for term, got in zip(terms, results, strict=True):
        top = max((s for _, s in got), default=0.0)
        if top <= 0.0:
            unsure.append(term)
            continue
        best[term] = top
        for cid, s in got:
            if cid in matched and s > 0.0:
                matched[cid] += s
    if unsure:
        best.update((t, got[0][1]) for t, got in zip(unsure, alone(unsure), strict=True) if got)
    return TermEvidence(best, matched)
