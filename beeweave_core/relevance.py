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
  as the heaviest matched one would were it as rare as a term can be (the store does not know
  that part of the question, and a name every memory holds is no answer to it);
- ``coverage``: the share of the query's distinct terms found in the memory's own text (the
  one lexical evidence left in a store of a few memories, where BM25's idf is 0);
- ``background``: the query's mean cosine with everyday statements that answer nothing;
- ``lead``: how far the memory's cosine stands above the next closest texts (the other
  memories' and the everyday statements'), a measure relative to the store, which the raw
  cosine is not; at most how far it stands above the memory's closeness to everyday
  questions (a memory close to every question is no evidence for this one).

The first four enter one logistic curve, which leans on words: no relevant memory in its
fitting set shares no word with its question. The lead enters a second, semantic curve, and
``relevance`` is the higher of the two, so that a paraphrase or a question in the other
language whose memory stands out is not silenced. With a cross-encoder reranker its
probability (the sigmoid of its logit) is averaged with the result (not fitted: no
cross-encoder ships with the library).

How the coefficients were fitted: ``python benchmarks/abstention.py --fit`` on the LoCoMo
development split (``/work/shared/data/locomo``): every question's top 10 hits in its own
conversation (label 1 for an evidence turn, 0 otherwise), the same questions asked of the
other conversations with their speakers' names swapped for this conversation's, and generic
off-topic questions (all hits label 0); scikit-learn's ``LogisticRegression`` with balanced
classes. ``DEFAULT_MIN_RELEVANCE`` is the highest threshold that keeps 95 % of the on-topic
recall@10 there, and ``DEFAULT_ABSTAIN_BELOW`` the highest gate on a search's best hit that
does: the default model's gate, applied by every search unless ``abstain_below=0``. The
semantic curve's slope is a logistic regression of "the memory asked for" on the lead over
``benchmarks/paraphrases.py`` (everyday memories, questions sharing no word with them,
unrelated questions; written for the library), and it crosses the gate at the 99th
percentile of the best lead of the LoCoMo off-topic questions the first curve silences (it
lets through at most 1 % of them). Nothing here knows the data: the features are general
retrieval evidence. ``benchmarks/RESULTS.md`` has the figures, leave-one-conversation-out
among them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .embedders import DEFAULT_MODEL_NAME, MINILM_MODEL_NAME
from .store.base import TermEvidence

if TYPE_CHECKING:
    from .filters import Filter
    from .records import SearchHit
    from .store.base import StoreBackend

__all__ = ["BACKGROUND", "QUESTIONS", "mean_cosine", "top_cosines", "memory_lead", "semantic_leads", "counts_as_use", "gated", "default_gate", "LEAD_OF", "lead", "leads", "Calibration", "calibration_for", "E5_CALIBRATION", "MINILM_CALIBRATION", "UNCALIBRATED", "Evidence",
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
    # The "nothing relevant" gate (`abstain_below`; the search's default for this model): a
    # search whose best hit is below it returns nothing, one that has a hit above it returns
    # its hits as ranked (an indirectly useful memory, "allergic to peanuts" for "a dessert
    # for my dinner party", stays beside the relevant one). The highest gate that keeps 95 %
    # of the on-topic recall@10 (a gate loses a query's recall only when it silences the whole
    # query, so it can sit higher than the floor). None: no tuned gate (an uncalibrated model).
    abstain_below: float | None
    # The weight of ``cosine - background`` (0: the curve does not read the background).
    margin: float = 0.0
    # The second, semantic curve ``sigmoid(lead_weight * lead + lead_intercept)`` (0: none):
    # a memory that stands out from the texts next closest to the question is relevant
    # though it shares no word with it (a paraphrase, another language). ``relevance`` is
    # the higher of the two curves.
    lead_weight: float = 0.0
    lead_intercept: float = 0.0


# Fitted by `python benchmarks/abstention.py --fit` (see the module docstring), all five conversations
# and the paraphrase set. multilingual-e5-small (the default model), 2026-12-06, with a query term
# no memory in scope holds weighed as the heaviest matched term were it rare (lexical_evidence);
# the lead curve crosses the gate at a lead of 0.0162. Since then the lead reads each memory's own
# cosine, not its session context's (Search._own_cosines): nothing changes for memories without
# session context; in sessions more answers pass (LoCoMo on-topic R@10 kept 0.953 -> 0.965) and
# more name-swapped questions too (silent 0.731 -> 0.683). Neither a refit (its lead crossing
# rises to 0.025: 10 of the paraphrase set's 24 answered, not 15) nor the gate set again by its
# rule (0.433: a new user's stores of 10-30 memories keep 6-9 points less of their answers) was
# kept (benchmarks/history/abstention.md).
E5_CALIBRATION = Calibration(cosine=12.861, lexical=4.334, coverage=1.179, intercept=-14.870,
                             min_relevance=0.242, abstain_below=0.391, margin=10.918,
                             lead_weight=108.659, lead_intercept=-2.199)
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


def default_gate(configured: float | None, model: str) -> float | None:
    """A store's "nothing relevant" gate: ``configured`` (``SearchConfig.abstain_below``)
    when set, else the tuned gate of its embedding model (None for a model nobody fitted)."""
    return configured if configured is not None else calibration_for(model).abstain_below


def gated(hits: list[SearchHit], gate: float | None) -> list[SearchHit]:
    """A search's hits behind the "nothing relevant" gate: none when no hit's relevance
    reaches ``gate`` (the caller takes the no-memory path), else all of them, those that
    reach it first (each side as ranked; a hit's score at most the one above it, so the
    scores stay sorted). The ranking's session context can lift a neighbour of the answer
    above it ("Mei is vegetarian" above "a trip ... with my sister Mei" for "who is
    travelling with me?", relevance 0.05 and 0.90): what relevance judged relevant leads."""
    if not gate:
        return hits
    passing = [(h.relevance or 0.0) >= gate for h in hits]
    if not any(passing):
        return []
    return scores_kept_sorted([h for h, p in zip(hits, passing, strict=True) if p]
                              + [h for h, p in zip(hits, passing, strict=True) if not p])


def scores_kept_sorted(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """``hits`` in the order given, each score at most the one above it: an order that is not
    the scores' (relevance first, use, a query's questions in turns) keeps the scores sorted."""
    out: list[SearchHit] = []
    for h in hits:
        out.append(h if not out or h.score <= out[-1].score else replace(h, score=out[-1].score))
    return out


def counts_as_use(hit_relevance: float | None, gate: float | None) -> bool:
    """Whether a returned hit counts as a use of its memory (an access, for "hottest" and
    promotion): it reaches the store's gate. A search with the gate turned off
    (``abstain_below=0``) returns the closest memories anyway; those below the gate were
    not what the question was about. With no gate (a model nobody fitted) every hit counts."""
    return not gate or (hit_relevance is not None and hit_relevance >= gate)


# A dialogue query may carry 64 terms; the heaviest this many bound the lexical evidence's cost
# (one index lookup per term).
RELEVANCE_TERMS = 16


class Evidence(NamedTuple):
    """What relevance is read from, each in [0, 1] (cosines in [-1, 1]). ``background``: the
    query's mean cosine with everyday statements that answer nothing (``BACKGROUND.cosine``),
    so that ``cosine - background`` says how much closer the memory is than any memory would
    be: a model whose cosines crowd near 0.8 (multilingual-e5-small) needs that margin, not
    the raw cosine, to tell a paraphrase from an unrelated memory. ``lead``: how far the
    memory's cosine stands above the mean of the ``LEAD_OF`` next closest texts, the other
    memories of the scope and the everyday statements together (``lead``), and at most how
    far it stands above the memory's own closeness to everyday questions (``memory_lead``):
    ``semantic_leads``."""

    cosine: float
    lexical: float = 0.0
    coverage: float = 0.0
    background: float = 0.0
    lead: float = 0.0


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 60.0), -60.0)))


def relevance(evidence: Evidence, cross_encoder: float | None = None,
              calibration: Calibration = E5_CALIBRATION) -> float:
    """The calibrated relevance in [0, 1] of one hit's evidence (``cross_encoder``: its raw
    score) on the curve of ``calibration`` (default: the default model's)."""
    c = calibration
    p = _sigmoid(c.cosine * evidence.cosine + c.lexical * evidence.lexical + c.coverage * evidence.coverage
                 + c.margin * (evidence.cosine - evidence.background) + c.intercept)
    if c.lead_weight:
        p = max(p, _sigmoid(c.lead_weight * evidence.lead + c.lead_intercept))
    if cross_encoder is not None:
        # A reranker that already outputs a probability is taken as it is; a logit goes through the sigmoid.
        ce = cross_encoder if 0.0 <= cross_encoder <= 1.0 else _sigmoid(cross_encoder)
        p = (p + ce) / 2.0
    return p


class Background:
    """Everyday texts in English and Chinese about nothing in particular, embedded once per
    embedder. ``BACKGROUND``: statements that answer no particular question
    (``data/background.txt``, embedded as documents): a query's mean cosine with them is how
    close any memory is to it (``Evidence.background``). ``QUESTIONS``: questions no
    particular memory answers (``data/background_questions.txt``, embedded as queries): a
    memory's cosine with them is how close it comes to any question (``memory_lead``)."""

    def __init__(self, file: str = "background.txt", *, queries: bool = False) -> None:
        self._file = file
        self._queries = queries
        self._vectors: dict[int, tuple[object, np.ndarray]] = {}
        self._lock = threading.Lock()

    def vectors(self, embedder: object) -> np.ndarray:
        """The texts' vectors under ``embedder`` (computed at its first use)."""
        key = id(embedder)
        found = self._vectors.get(key)
        if found is None or found[0] is not embedder:
            texts = [line.strip() for line in (Path(__file__).parent / "data" / self._file)
                     .read_text(encoding="utf-8").splitlines() if line.strip()]
            if self._queries:
                vecs = np.asarray([embedder.embed_query(t) for t in texts], dtype=np.float32)  # type: ignore[attr-defined]
            else:
                vecs = np.asarray(embedder.embed_documents(texts), dtype=np.float32)  # type: ignore[attr-defined]
            with self._lock:
                self._vectors[key] = found = (embedder, vecs)
        return found[1]

    def cosine(self, embedder: object, query_vector: np.ndarray) -> float:
        """The vector's mean cosine with the texts (0 when the dimensions differ)."""
        return mean_cosine(self.cosines(embedder, query_vector))

    def cosines(self, embedder: object, query_vector: np.ndarray) -> np.ndarray:
        """The vector's cosine with each text (none when the dimensions differ)."""
        vecs = self.vectors(embedder)
        if vecs.shape[1] != len(query_vector):
            return np.zeros(0, dtype=np.float32)
        return vecs @ np.asarray(query_vector, dtype=np.float32)


BACKGROUND = Background()
QUESTIONS = Background("background_questions.txt", queries=True)

# How many of the next closest texts a memory's lead is measured over.
LEAD_OF = 5


def mean_cosine(cosines: np.ndarray) -> float:
    """``Evidence.background`` from the query's cosines with the everyday statements
    (``BACKGROUND.cosines``): their mean, 0 when there are none."""
    return float(np.mean(cosines)) if len(cosines) else 0.0


def top_cosines(cosines: np.ndarray, n: int = LEAD_OF + 1) -> list[float]:
    """The ``n`` highest of a search's candidate cosines, highest first: what ``leads`` reads
    each hit against. A partial selection, then a sort of those ``n`` only: the candidates
    run to hundreds, and only a search on a curve with a lead reads them."""
    values = np.asarray(cosines)
    if len(values) > n:
        values = np.partition(values, len(values) - n)[len(values) - n:]
    return np.sort(values)[::-1].tolist()


def lead(cosine: float, others: Sequence[float], background: Sequence[float]) -> float:
    """How far ``cosine`` (a memory's, with the question) stands above the mean of the
    ``LEAD_OF`` highest of ``others`` (the other memories' cosines: the top of the search's
    vector candidates, without the memory itself) and ``background`` (the everyday
    statements', ``BACKGROUND.cosines``), 0 when there are none. A relative measure: its
    scale does not move with the genre of the memories (dialogue turns crowd nearer any
    question than short facts do) as the raw cosine and its margin do; the statements stand
    in for the other memories of a store of a few."""
    nearest = sorted([*others, *background], reverse=True)[:LEAD_OF]
    return cosine - sum(nearest) / len(nearest) if nearest else 0.0


def memory_lead(memory_vector: np.ndarray, query_vector: np.ndarray, questions: np.ndarray) -> float:
    """How far a memory's cosine with the question stands above the mean of its ``LEAD_OF``
    highest cosines with everyday questions (``questions``: ``QUESTIONS.vectors``): the
    memory's side of the lead. A memory every question comes close to (a JSON blob, a log
    line: another genre than the everyday statements) stands out from the statements for
    any question, not from the questions."""
    own = np.asarray(memory_vector, dtype=np.float32)
    if questions.shape[1] != len(own) or len(own) != len(query_vector):
        return 0.0
    nearest = np.sort(questions @ own)[::-1][:LEAD_OF]
    return float(own @ np.asarray(query_vector, dtype=np.float32) - nearest.mean())


def semantic_leads(backend: StoreBackend, embedder: object, ids: Sequence[str], cosines: Sequence[float],
                   top: Sequence[float], query_vector: np.ndarray,
                   matters: Callable[[str, float], bool] | None = None, *,
                   background: Sequence[float]) -> list[float]:
    """Each hit's ``Evidence.lead``: the lower of the question's side (``leads``: its cosine
    against the next closest memories and the statements, ``background``: the question's
    cosines with them, ``BACKGROUND.cosines``, which the search reads once for its
    ``Evidence.background`` too) and the memory's (``memory_lead``), which is read (one
    vector read) only for the hits whose question side is positive and, given
    ``matters(id, question side)``, for which it can change the relevance (the lead's curve
    there above the other curve: a lower lead cannot change the higher)."""
    found = leads(cosines, top, background)
    rising = [cid for cid, x in zip(ids, found, strict=True) if x > 0.0 and (matters is None or matters(cid, x))]
    if rising:
        vectors = backend.get_vectors(rising)
        questions = QUESTIONS.vectors(embedder)
        found = [min(x, memory_lead(vectors[cid], query_vector, questions)) if cid in vectors else x
                 for cid, x in zip(ids, found, strict=True)]
    return found


def leads(cosines: Sequence[float], top: Sequence[float], background: Sequence[float]) -> list[float]:
    """``lead`` of each hit's ``cosines`` against ``top``, the highest cosines of the
    search's candidates (its vector top, at least ``LEAD_OF + 1``, the hits' own among them
    when they are that close): each hit's own cosine is taken out of ``top`` once. Only the
    ``LEAD_OF`` highest of ``background`` can be among a lead's next closest, so they are
    picked once for every hit (``lead`` then sorts a dozen values, not the whole list)."""
    nearest = sorted(background, reverse=True)[:LEAD_OF]
    out = []
    for c in cosines:
        others = list(top)
        for i, t in enumerate(others):
            if abs(t - c) <= 1e-7:
                del others[i]
                break
        else:
            others = others[:LEAD_OF]
        out.append(lead(c, others, nearest))
    return out


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
    the denominator as much as the heaviest matched term would score were it as rare as a
    term can be: its best times idf(df = 1) over its own idf (``SearchIndex.term_idf``), and
    never less than the heaviest matched term's best. "What is Jon allergic to?" asked of a
    dialogue store that never mentions an allergy is not answered by "Jon: Oof, sorry to hear
    that. What's up?", however well it matches the name: counted as only the name's best, the
    absent "allergic" would weigh as little as a name most turns hold, and the name alone
    would be half the evidence. Weighed by the matched term's idf rather than by a fixed
    reference, a rare matched term leaves the absent one at its own best, so a short query
    that matches a long memory by one rare word ("PostgreSQL database") is not silenced by the
    memory's length. ``found``: those scores as the search's own round trip read them for
    ``evidence_terms(terms)`` (PostgreSQL), else they are read here.

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
    total = best_total + (absent * _absent_weight(found, [t for t, _ in heaviest]) if absent else 0.0)
    return {cid: min(matched[cid] / total, 1.0) for cid in ids}


def _absent_weight(found: TermEvidence, terms: Sequence[str]) -> float:
    """What a query term no memory in scope holds weighs: the highest of the matched
    ``terms``' bests, each as if its term were held by one record (``best * rare / idf``: the
    same query count, term count and length), and never less than the highest best itself."""
    weight = 0.0
    for t in terms:
        best = found.best.get(t, 0.0)
        if best > 0.0:
            idf = found.idf.get(t, 0.0)
            weight = max(weight, best, best * found.rare / idf if idf > 0.0 else best)
    return weight


def _read_evidence(backend: StoreBackend, heaviest: list[tuple[str, int]], flt: Filter,
                   ids: Sequence[str]) -> TermEvidence:
    """Each term's best score in scope, and each id's sum of its positive per-term scores: a
    single-term search per term."""
    counts = dict(heaviest)

    def search(terms: Sequence[str], include: Sequence[str]) -> list[list[tuple[str, float]]]:
        queries = [{t: counts[t]} for t in terms]
        if (one_trip := backend.capabilities.term_searches) is not None:  # one round trip, not one per term
            return one_trip.lexical_searches(queries, flt, 1, include=include) if queries else []
        return [backend.lexical_search(q, flt, 1, include=include) for q in queries]

    terms = list(counts)
    return term_evidence(terms, search(terms, ids), ids, lambda unsure: search(unsure, ()), backend.term_idf(terms))


def term_evidence(terms: Sequence[str], results: Sequence[Sequence[tuple[str, float]]], ids: Sequence[str],
                  alone: Callable[[list[str]], Sequence[Sequence[tuple[str, float]]]],
                  idf: tuple[dict[str, float], float]) -> TermEvidence:
    """``TermEvidence`` from each term's single-term search (``lexical_search({term: qtf},
    flt, 1, include=ids)``, aligned with ``terms``): a term's best is its search's top score
    when positive. For the terms whose top is not positive, ``alone`` gives the same searches
    without ``include``: a term found there has its top as its best (it is in scope, its idf
    fell to zero or below: no evidence either way), one not found has none (no memory in
    scope has it, as the search statement of PostgreSQL tells apart). Each id sums its
    positive per-term scores. ``idf``: ``term_idf(terms)`` of the same index."""
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
    weights, rare = idf
    return TermEvidence(best, matched, {t: weights[t] for t in terms if t in weights}, rare)
