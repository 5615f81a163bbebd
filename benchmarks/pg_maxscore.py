"""Would MaxScore pruning pay in the PostgreSQL BM25 statement? Counts, for the scale
benchmark's queries on a store built by pg_profile.py, the context postings the
statement reads today (every posting of every query term) against what an exact
MaxScore would read, and times in the server what a posting read in a range and a
posting looked up by key cost, so the counts can be priced.

    python benchmarks/pg_profile.py URL --n 100000 --queries 0 --adds 0   # builds prof_100000 once
    python benchmarks/pg_maxscore.py URL --n 100000 --queries 50

A posting contributes ``wt * f(k1+1) / (f + K) < wt (k1+1)``, so each term has the bound
``ub = max(wt, 0) (k1+1)``. With ``theta`` a lower bound of the k-th best score, the
non-essential terms are the longest run of smallest bounds whose sum is below ``theta``:
a record found only there cannot reach the top k, so their postings are needed only for
the records the essential terms found, and only for those whose partial score plus the
bounds still left can reach ``theta`` (looked up in bound order, stopping once it
cannot). Every variant's top k is checked against the exhaustive one (to 1e-9).

The variants differ in where ``theta`` comes from, since a one-statement search has to
fix it before it reads the long lists:

- ``oracle``: the true k-th best score, known in advance (no statement can do better);
- ``rarest term``: the k-th best score from the largest-bound term's postings alone;
- ``essential prefix``: terms in bound order until the k-th best partial score of the
  terms read prunes all the rest (what a term-at-a-time MaxScore reaches);
- ``+ rescored``: ``theta`` raised to the k-th best exact score of the 2k best records
  by partial score (their other terms looked up by key, counted as lookups).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from pg_profile import _open  # noqa: E402
from scale_data import DEFAULT_CACHE_DIR, Precomputed, ScaleCorpus, Vectors, ensure_text_embeddings  # noqa: E402

from beeweave_core.filters import build_filter  # noqa: E402
from beeweave_core.query import prepare_query  # noqa: E402
from beeweave_core.store.postgres.sql import _BM25_POSTING, _QI_CTES  # noqa: E402

# Every context posting of the query terms with its BM25 contribution, as LEX_PLAIN reads them.
POSTINGS_SQL = "WITH " + _QI_CTES + """
SELECT qi.term, qi.wt, cp.seq, """ + _BM25_POSTING + """
FROM qi JOIN @cpost cp ON cp.tenant = %(t)s AND cp.term = qi.term {cpf} CROSS JOIN st"""

Postings = dict[str, dict[int, float]]


def kth(values: Any, k: int) -> float:
    v = sorted(values, reverse=True)
    return v[k - 1] if len(v) >= k else float("-inf")


def scores(post: Postings, terms: Sequence[str]) -> Counter[int]:
    out: Counter[int] = Counter()
    for t in terms:
        for seq, c in post[t].items():
            out[seq] += c
    return out


def top(score: dict[int, float], k: int) -> list[int]:
    return sorted(score, key=lambda s: (-score[s], s))[:k]


def maxscore(post: Postings, ub: dict[str, float], order: list[str], first: list[str], theta: float | None,
             rescore: bool, k: int) -> tuple[int, int, list[int], dict[int, float]]:
    """(postings read in ranges, postings looked up by key, the top k, their scores) of one
    exact MaxScore: the terms of ``first`` read in full, ``theta`` from them (unless given),
    then the essential terms' postings in full and the rest by key."""
    lookups = 0
    full = scores(post, order)
    part = scores(post, first)
    if theta is None:
        theta = kth(part.values(), k)
        if rescore:
            best = top(part, 2 * k)
            lookups += len(best) * (len(order) - len(first))
            theta = max(theta, kth([full[s] for s in best], k))
    tail, pruned = 0.0, []
    for t in reversed(order):  # smallest bound first
        if (tail + ub[t]) * (1 + 1e-9) < theta:
            tail += ub[t]
            pruned.append(t)
        else:
            break
    read = [t for t in order if t in first or t not in pruned]
    by_key = [t for t in order if t not in read]
    seen = scores(post, read)
    theta = max(theta, kth(seen.values(), k))
    exact: dict[int, float] = {}
    rest = sum(ub[t] for t in by_key)
    for seq, p in seen.items():
        left = rest
        for t in by_key:  # largest bound first; stop once the record cannot reach theta
            if (p + left) * (1 + 1e-9) < theta:
                break
            lookups += 1
            p += post[t].get(seq, 0.0)
            left -= ub[t]
        if (p + left) * (1 + 1e-9) >= theta:
            exact[seq] = p
    return sum(len(post[t]) for t in read), lookups, top(exact, k), exact


def essential_prefix(post: Postings, ub: dict[str, float], order: list[str], k: int) -> list[str]:
    for j in range(1, len(order) + 1):
        theta = kth(scores(post, order[:j]).values(), k)
        tail, n = 0.0, 0
        for t in reversed(order):
            if (tail + ub[t]) * (1 + 1e-9) < theta:
                tail, n = tail + ub[t], n + 1
            else:
                break
        if len(order) - n <= j:
            return order[:j]
    return order


def unit_costs(backend: Any, flt: Any, term: str, other: str) -> tuple[float, float, int, int]:
    """Server time (EXPLAIN ANALYZE, TIMING OFF, median of 5) per posting of ``term`` read
    as the statement reads it (its range, summed per record) and per posting of ``term``
    looked up by its full key in cpost_search for the records of ``other``, in seq order
    (the benchmark's longest posting list, at the records of the second longest of its
    query: thousands of lookups, each a hit or a miss as MaxScore's would be)."""
    def run(template: str, params: dict[str, Any]) -> float:
        stmt, args = backend._statement(template, flt)  # noqa: SLF001
        out = []
        with backend._tx(read_only=True) as conn:  # noqa: SLF001
            backend._settings(conn, 50)  # noqa: SLF001
            for _ in range(5):
                plan = conn.execute("EXPLAIN (ANALYZE, TIMING OFF) " + stmt, {**params, **args}).fetchall()
                out.append(float(re.search(r"Execution Time: ([\d.]+)", plan[-1][0]).group(1)))  # type: ignore[union-attr]
        return statistics.median(out)

    params = backend._lexical_params({term: 1})  # noqa: SLF001
    rng = "WITH " + _QI_CTES + """
    SELECT cp.seq, sum(""" + _BM25_POSTING + """) FROM qi JOIN @cpost cp ON cp.tenant = %(t)s AND cp.term = qi.term {cpf}
    CROSS JOIN st GROUP BY cp.seq"""
    stmt, args = backend._statement(POSTINGS_SQL, flt)  # noqa: SLF001
    with backend._conn() as conn:  # noqa: SLF001
        n_range = len(conn.execute(stmt, {**params, **args}).fetchall())
        keys = conn.execute(stmt, {**backend._lexical_params({other: 1}), **args}).fetchall()  # noqa: SLF001
    seqs = sorted(r[2] for r in keys)
    look = "WITH " + _QI_CTES + """
    SELECT cp.seq, """ + _BM25_POSTING + """ FROM qi CROSS JOIN unnest(%(seqs)s::bigint[]) AS s(seq)
    JOIN @cpost cp ON cp.tenant = %(t)s AND cp.term = qi.term {cpf} AND cp.seq = s.seq
    CROSS JOIN st"""
    t_range = run(rng, params)
    t_look = run(look, {**params, "seqs": seqs})
    return 1000 * t_range / max(n_range, 1), 1000 * t_look / max(len(seqs), 1), n_range, len(seqs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--data", default="/work/shared/data/locomo")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--k", type=int, default=50, help="the lexical top k (a k=10 search asks for the engine's 50)")
    args = ap.parse_args()

    corpus = ScaleCorpus.load(Path(args.data))
    vectors = Vectors(corpus, "text", ensure_text_embeddings(args.data, str(DEFAULT_CACHE_DIR)))
    queries = corpus.queries(args.queries + 5, 1, vectors)[5:]  # pg_profile's timed queries
    embedder = Precomputed("scale-benchmark:minilm-copies-384")
    embedder.add([q.text for q in queries], np.stack([q.vector for q in queries]))
    memory = _open(args.url, args.n, embedder)
    backend = memory.backend
    if backend.count(None) < args.n:
        sys.exit(f"schema prof_{args.n} holds fewer than {args.n} memories: build it with "
                 f"python benchmarks/pg_profile.py URL --n {args.n} --queries 0 --adds 0")
    k1 = float(backend.index_config.k1)
    tokenizer = memory._shared.tokenizer  # noqa: SLF001
    names = ("oracle", "rarest term", "rarest term + rescored", "essential prefix", "essential prefix + rescored")
    ranged, looked = Counter[str](), Counter[str]()
    today = 0
    longest: tuple[int, str, str] = (0, "", "")
    for q in queries:
        terms = prepare_query(q.text, tokenizer).terms
        flt = build_filter({"user_id": q.user_id})
        stmt, fargs = backend._statement(POSTINGS_SQL, flt)  # noqa: SLF001
        with backend._conn() as conn:  # noqa: SLF001
            rows = conn.execute(stmt, {**backend._lexical_params(terms), **fargs}).fetchall()  # noqa: SLF001
        wt: dict[str, float] = {}
        post: Postings = {}
        for term, w, seq, c in rows:
            wt[term] = w
            post.setdefault(term, {})[seq] = c
        if not post:
            continue
        ub = {t: max(w, 0.0) * (k1 + 1) for t, w in wt.items()}
        order = sorted(ub, key=lambda t: (-ub[t], t))
        full = scores(post, order)
        want = top(full, args.k)
        today += len(rows)
        by_len = sorted(order, key=lambda t: -len(post[t]))
        if len(by_len) > 1 and len(post[by_len[0]]) > longest[0]:
            longest = (len(post[by_len[0]]), by_len[0], by_len[1])
        prefix = essential_prefix(post, ub, order, args.k)
        runs = {"oracle": (order[:1], kth(full.values(), args.k), False),
                "rarest term": (order[:1], None, False), "rarest term + rescored": (order[:1], None, True),
                "essential prefix": (prefix, None, False), "essential prefix + rescored": (prefix, None, True)}
        for name, (first, theta, rescore) in runs.items():
            r, lk, got, exact = maxscore(post, ub, order, first, theta, rescore, args.k)
            # the same records up to ties at the k-th score, each with its exhaustive score
            assert len(got) == len(want) and all(abs(exact[s] - full[s]) < 1e-9 for s in got), (q.text, name)
            assert all(abs(a - b) < 1e-9 for a, b in zip(sorted(full[s] for s in got), sorted(full[s] for s in want)))
            ranged[name] += r
            looked[name] += lk
    flt = build_filter({"user_id": queries[0].user_id})
    per_posting, per_lookup, n_range, n_look = unit_costs(backend, flt, longest[1], longest[2])
    price = per_lookup / per_posting
    print(f"{len(queries)} queries, lexical top {args.k}, prof_{args.n}: today every query term's postings, "
          f"{today} in all ({today / len(queries):.0f} a query)")
    print(f"server time: {per_posting:.2f} us a posting read in its range ({n_range} of {longest[1]!r}), "
          f"{per_lookup:.2f} us a posting looked up by key ({n_look} of {longest[1]!r} at the records of "
          f"{longest[2]!r}): a lookup costs {price:.1f} range postings")
    for name in names:
        r, lk = ranged[name], looked[name]
        print(f"{name:28s} ranges {r:8d} ({today / r:.2f}x fewer)  lookups {lk:7d}  "
              f"ranges+lookups {today / (r + lk):.2f}x  priced at {price:.1f}: {today / (r + price * lk):.2f}x")
    memory.close()


if __name__ == "__main__":
    main()
