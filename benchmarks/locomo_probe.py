"""Where BeeWeave's LoCoMo recall is lost, and what re-ranking the same candidates could win.

    python benchmarks/locomo_probe.py [DATA_DIR]

Runs the default search (as benchmarks/locomo.py does, k = 20) and keeps what each question's
fusion saw: the candidate ids with their BM25 (session context) and vector (context vector)
scores and the fusion weights. From those it prints the recall by question category, where
the evidence turns rank (top 10, 10-20, 20-50, deeper in the pool, not a candidate at all:
the ceiling of any re-ranking of this pool), and recall after re-ranking the same pool by
variants of the fusion, each a general idea rather than a rule for this data:

- the vector weight scaled either side of the engine's (x 0.7 to 1.3);
- a bonus for turns whose speaker the question names;
- a session-level score (its best or its top three candidates' mean) added to each turn's;
- session diversity: a penalty for each earlier pick from the same session, or one flat
  penalty once a session is represented (multi-hop questions have evidence in several
  sessions).

The fusion is recomputed from the captured scores; the first line checks that it reproduces
the engine's ranking (same top 10 for every question whose search fused once). The query's
embedding uses the default model; nothing is downloaded.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DEFAULT_DATA_DIR, load_locomo, recall_at_k  # noqa: E402

import beeweave_core.engine.search as engine_search  # noqa: E402
from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.embedders import SentenceTransformerEmbedder  # noqa: E402

K = 20


@dataclass
class Probe:
    question: str
    category: int
    evidence: tuple[str, ...]
    ranked: list[str]  # the engine's top K
    fused: list[tuple[list[str], np.ndarray, np.ndarray, dict[str, float]]]  # each fusion: ids, lexical, vector, weights
    speakers: dict[str, str]  # turn id -> speaker
    sessions: dict[str, int]  # turn id -> session


def collect(data_dir: Path) -> list[Probe]:
    """Every question's search, with what its fusion saw (a spy on the engine's fuse_scores)."""
    seen: list[tuple[list[str], np.ndarray, np.ndarray, dict[str, float]]] = []
    fuse = engine_search.fuse_scores

    def spy(ids, scores, **kw):  # type: ignore[no-untyped-def]
        seen.append((list(ids), np.asarray(scores["lexical"], np.float64).copy(),
                     np.asarray(scores["vector"], np.float64).copy(), dict(kw.get("weights") or {})))
        return fuse(ids, scores, **kw)

    engine_search.fuse_scores = spy  # type: ignore[assignment]
    try:
        embedder = SentenceTransformerEmbedder()
        convs, questions = load_locomo(data_dir)
        out = []
        for conv in convs:
            user = f"conv-{conv.conv_id}"
            speakers = {t.dia_id: t.speaker for t in conv.turns}
            sessions = {t.dia_id: t.session for t in conv.turns}
            with BeeWeave(embedder=embedder) as memory:
                memory.add_many([{"content": t.content, "user_id": user, "chunk_id": t.dia_id,
                                  "session_id": str(t.session), "timestamp": t.timestamp} for t in conv.turns],
                                show_progress=False, trusted=True)
                for q in (q for q in questions if q.conv_id == conv.conv_id):
                    seen.clear()
                    ranked = [h.id for h in memory.search(q.question, user_id=user, k=K, abstain_below=0)]
                    out.append(Probe(q.question, q.category, q.evidence, ranked, list(seen), speakers, sessions))
        return out
    finally:
        engine_search.fuse_scores = fuse  # type: ignore[assignment]


def _z(s: np.ndarray) -> np.ndarray:
    sd = s.std()
    return (s - s.mean()) / sd if sd > 1e-9 else np.zeros_like(s)


# A variant: (probe, ids, lexical z, vector z, fused total) -> a new total.
Variant = Callable[[Probe, list[str], np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def rerank(p: Probe, variant: Variant | None = None, diversity: tuple[float, bool] | None = None) -> list[str]:
    """The pool re-ranked; a question whose search fused more than once (a time range that
    matched nothing, several questions) keeps the engine's ranking."""
    if len(p.fused) != 1:
        return p.ranked
    ids, lex, vec, w = p.fused[0]
    lz, vz = _z(lex), _z(vec)
    total = w.get("lexical", 1.0) * lz + w.get("vector", 1.0) * vz
    if variant is not None:
        total = variant(p, ids, lz, vz, total)
    order = [int(i) for i in np.lexsort((np.array(ids), -total))]
    if diversity is None:
        return [ids[i] for i in order]
    delta, flat = diversity
    picked: list[int] = []
    used: dict[int, int] = defaultdict(int)
    pool = order[:60]
    while pool and len(picked) < K:
        best = max(pool, key=lambda i: total[i] - delta * (min(used[p.sessions[ids[i]]], 1) if flat
                                                         else used[p.sessions[ids[i]]]))
        pool.remove(best)
        picked.append(best)
        used[p.sessions[ids[best]]] += 1
    return [ids[i] for i in picked]


def recall(probes: list[Probe], rank: Callable[[Probe], list[str]]) -> dict[int, float]:
    got = [rank(p) for p in probes]
    return {k: float(np.mean([recall_at_k(r, p.evidence, k) for r, p in zip(got, probes, strict=True)]))
            for k in (1, 5, 10, 20)}


def _row(name: str, r: dict[int, float]) -> None:
    print(f"| {name} | " + " | ".join(f"{r[k]:.3f}" for k in (1, 5, 10, 20)) + " |")


def _speaker(beta: float) -> Variant:
    def v(p: Probe, ids: list[str], lz: np.ndarray, vz: np.ndarray, total: np.ndarray) -> np.ndarray:
        q = p.question.lower()
        return total + beta * np.array([p.speakers[i].lower() in q for i in ids], np.float64)
    return v


def _session_score(gamma: float, top: int) -> Variant:
    def v(p: Probe, ids: list[str], lz: np.ndarray, vz: np.ndarray, total: np.ndarray) -> np.ndarray:
        sess = np.array([p.sessions[i] for i in ids])
        out = total.copy()
        for s in set(sess.tolist()):
            m = sess == s
            out[m] += gamma * np.sort(total[m])[::-1][:top].mean()
        return out
    return v


def _vector_weight(wv: float) -> Variant:
    """The vector weight times ``wv`` (the lexical weight as the engine set it)."""
    def v(p: Probe, ids: list[str], lz: np.ndarray, vz: np.ndarray, total: np.ndarray) -> np.ndarray:
        w = p.fused[0][3]
        return w.get("lexical", 1.0) * lz + wv * w.get("vector", 1.0) * vz
    return v


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    args = parser.parse_args()
    probes = collect(args.data_dir)
    once = [p for p in probes if len(p.fused) == 1]
    same = np.mean([rerank(p)[:10] == p.ranked[:10] for p in once])
    print(f"{len(probes)} questions; {len(once)} fused once; recomputed fusion gives the engine's top 10 for "
          f"{same:.1%} of them")
    print(f"candidate pool: {np.mean([len(p.fused[0][0]) for p in once]):.0f} turns on average; evidence found in it "
          f"(the ceiling of re-ranking): {np.mean([recall_at_k(p.fused[0][0], p.evidence, 10**9) for p in once]):.3f}")
    ranks = np.array([rerank(p).index(e) if e in p.fused[0][0] else -1 for p in once for e in p.evidence])
    found = ranks >= 0
    print("evidence turns by rank: " + ", ".join(
        f"{name} {np.mean(m):.3f}" for name, m in (
            ("top 10", found & (ranks < 10)), ("10-20", found & (ranks >= 10) & (ranks < 20)),
            ("20-50", found & (ranks >= 20) & (ranks < 50)), ("deeper", found & (ranks >= 50)),
            ("not a candidate", ~found))))
    print("\n| category | questions | mean evidence turns | R@5 | R@10 | R@20 |\n|---|---|---|---|---|---|")
    by_cat: dict[int, list[Probe]] = defaultdict(list)
    for p in probes:
        by_cat[p.category].append(p)
    for cat, ps in sorted(by_cat.items()):
        r = recall(ps, lambda p: p.ranked)
        print(f"| {cat} | {len(ps)} | {np.mean([len(p.evidence) for p in ps]):.2f} | "
              f"{r[5]:.3f} | {r[10]:.3f} | {r[20]:.3f} |")
    print("\n| re-ranking of the same pool | R@1 | R@5 | R@10 | R@20 |\n|---|---|---|---|---|")
    _row("the engine (default)", recall(probes, lambda p: p.ranked))
    # The variants below start from this: the fusion recomputed, without the rank factors
    # (recency, weight) the engine multiplies in after it.
    _row("the fusion recomputed, no variant", recall(probes, rerank))
    for wv in (0.7, 0.85, 1.15, 1.3):
        _row(f"vector weight x {wv}", recall(probes, lambda p, wv=wv: rerank(p, _vector_weight(wv))))
    for beta in (0.1, 0.2, 0.4):
        _row(f"speaker named in the question +{beta}", recall(probes, lambda p, b=beta: rerank(p, _speaker(b))))
    for gamma in (0.1, 0.3, 0.5):
        for top in (1, 3):
            _row(f"session score (mean of its top {top}) x {gamma}",
                 recall(probes, lambda p, g=gamma, t=top: rerank(p, _session_score(g, t))))
    for delta in (0.1, 0.3, 0.5):
        for flat in (False, True):
            name = "once per session" if flat else "per earlier pick"
            _row(f"session diversity {delta} {name}", recall(probes, lambda p, d=delta, f=flat: rerank(p, None, (d, f))))


if __name__ == "__main__":
    main()
