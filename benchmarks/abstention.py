"""Does "nothing relevant" work? Calibrated relevance on the LoCoMo development split.

Usage:
    python benchmarks/abstention.py [DATA_DIR] [--fit] [--leave-one-out] [--features PATH] [--per-conv N]
                                    [--answerable benchmarks/abstention_answerable.json] [--dump PATH]
    python benchmarks/abstention.py [DATA_DIR] --small-stores 3,5,10,30,100,300,all [--per-conv N]

One store per conversation (as benchmarks/locomo.py builds them), searched with the default
settings (k = 10, no floor). Three kinds of query:

- on-topic: the conversation's own questions (categories 1-4 with evidence);
- swapped: up to ``--per-conv`` (40) questions of each other conversation with that
  conversation's two speakers' names replaced by this one's (so a shared name is not the
  giveaway);
- generic: off-topic questions no chat between friends answers (``GENERIC`` below).

Measured at ``DEFAULT_ABSTAIN_BELOW`` (the faces' gate: a search whose best hit is below it
returns nothing, otherwise all its hits) and at ``DEFAULT_MIN_RELEVANCE`` (a floor: each hit
below it is dropped): (a) the on-topic recall@10 kept (the share of the unthresholded R@10),
(b) the share of off-topic queries that return no memory, and precision / recall of "has a
relevant memory" (positive: the unthresholded top 10 holds an evidence turn; predicted: a hit
reaches the threshold). The same is measured for the scores a peer would threshold (raw
cosine, raw BM25, the old fused score), each at its own floor chosen by the same rule (the
highest that keeps 95 % of R@10).

``--answerable FILE`` prints the table again without the swapped questions that FILE judges
answered by the conversation they are asked of after all ("How do X and Y both like to
destress?" asked of any two friends' chat). ``abstention_answerable.json`` holds one reader's
judgment of the swapped questions that passed the gate at ``--per-conv 15`` on 2026-12-05
and of all that passed ``DEFAULT_ABSTAIN_BELOW`` at ``--per-conv 40`` on 2026-12-06 (see its
``about``); questions the gate silenced were not read, so the second table bounds from below
what a better relevance could reach, and is not a labelled measure.
``--dump PATH`` writes the swapped questions that pass ``DEFAULT_ABSTAIN_BELOW`` (JSON: each
one's key as in that file, its text and its top three hits with their relevance), to read.

``--small-stores SIZES``: the gate in stores of a few memories, as a new user has. For each
size n and conversation, ``--per-conv`` (40) of its questions are each asked of a store of
their evidence turns plus random other turns of the conversation (n in all), and as many
off-topic queries (swapped and generic, drawn together) of a store of n random turns; ``all``
is the whole conversation. The turns are stored as independent memories (no session, so no
session context: a new user's facts), with their vectors computed once. Per size: the
highest gate that keeps 95 % of the on-topic R@10, the off-topic share it silences, and what
``DEFAULT_ABSTAIN_BELOW`` keeps and silences.

``--fit`` refits the default model's curves of ``beeweave_core/relevance.py`` and prints the
constants to paste there (``fit_curves``: the word-leaning logistic curve, hit level, an
evidence turn of an on-topic question 1 and any other hit 0, balanced classes; the semantic
curve over the lead, its slope from ``paraphrases.py`` and its crossing of the gate from the
off-topic questions here). ``--leave-one-out`` adds the gate read per conversation on curves
and thresholds fitted on the other conversations, and the paraphrase set's figures.
``--features PATH`` caches the searches' features (JSON) so a refit does not search again.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DEFAULT_DATA_DIR, load_locomo, recall_at_k  # noqa: E402
from relevance_rows import K, evidence_rows  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.embedders import as_embedder  # noqa: E402
from beeweave_core.relevance import (  # noqa: E402
    DEFAULT_ABSTAIN_BELOW,
    DEFAULT_MIN_RELEVANCE,
    Calibration,
    Evidence,
    relevance,
)

KEEP = 0.95  # the share of R@10 a threshold must keep

# Questions an assistant is asked that a friends' chat does not answer.
GENERIC = [
    "recipe for chocolate cake", "how does quicksort work", "what is the capital of Australia",
    "explain the difference between TCP and UDP", "how do I reset my router password",
    "what is the boiling point of water at altitude", "convert 50 miles to kilometers",
    "who wrote the theory of general relativity", "how to fix a segmentation fault in C",
    "what are the side effects of ibuprofen", "best way to learn linear algebra",
    "how do vaccines train the immune system", "what is the time complexity of heapsort",
    "how to file a tax return online", "what causes inflation in an economy",
    "how many moons does Jupiter have", "write a SQL query to find duplicate rows",
    "what is the population of Tokyo", "how to change a flat tire", "explain photosynthesis",
    "what is a Kubernetes pod", "how to install numpy with pip", "translate hello into Japanese",
    "what is the speed of light in a vacuum", "how do I center a div in CSS",
    "what year did the Berlin wall fall", "how does a mortgage interest rate work",
    "what is the chemical formula of table salt", "how to train a neural network with PyTorch",
    "what is the tallest mountain in Africa", "how to make sourdough starter",
    "what is the GDP of Germany", "how does garbage collection work in Java",
    "symptoms of vitamin D deficiency", "how to write a cover letter for a software job",
    "what is the difference between a virus and a bacterium", "how do solar panels generate electricity",
    "rules of chess castling", "how to unclog a kitchen sink", "what is quantum entanglement",
]


def _speakers(turns: list[Any]) -> list[str]:
    return list(dict.fromkeys(t.speaker for t in turns))[:2]


def _swap(text: str, old: list[str], new: list[str]) -> str:
    mapping = dict(zip(old, new))
    if not mapping:
        return text
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in mapping) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def collect(data_dir: Path, per_conv: int, partial: Path | None = None) -> list[dict[str, Any]]:
    convs, questions = load_locomo(data_dir)
    embedder = as_embedder(None)  # the default model
    rows: list[dict[str, Any]] = []
    by_conv = {c.conv_id: [q for q in questions if q.conv_id == c.conv_id] for c in convs}
    names = {c.conv_id: _speakers(c.turns) for c in convs}
    for conv in convs:
        user = f"conv-{conv.conv_id}"
        with BeeWeave(embedder=embedder) as memory:
            memory.add_many([{"content": t.content, "user_id": user, "chunk_id": t.dia_id,
                              "session_id": str(t.session), "timestamp": t.timestamp} for t in conv.turns],
                            show_progress=False)
            for q in by_conv[conv.conv_id]:
                rows.append({"conv": conv.conv_id, "kind": "on-topic", "query": q.question,
                             "evidence": list(q.evidence), "hits": evidence_rows(memory, user, q.question)})
            for other in convs:
                if other.conv_id == conv.conv_id:
                    continue
                for i, q in enumerate(by_conv[other.conv_id][:per_conv]):
                    text = _swap(q.question, names[other.conv_id], names[conv.conv_id])
                    rows.append({"conv": conv.conv_id, "kind": "swapped", "query": text, "evidence": [],
                                 "source": f"{other.conv_id}:{i}", "hits": evidence_rows(memory, user, text)})
            for text in GENERIC:
                rows.append({"conv": conv.conv_id, "kind": "generic", "query": text, "evidence": [],
                             "hits": evidence_rows(memory, user, text)})
        print(f"conversation {conv.conv_id}: searched", file=sys.stderr, flush=True)
        if partial is not None:  # a long run keeps what it has
            partial.write_text(json.dumps(rows))
    return rows


def _features(h: dict[str, Any]) -> list[float]:
    return [h["cosine"], h["lexical"], h["coverage"], h["cosine"] - h["background"]]


def _evidence(h: dict[str, Any]) -> Evidence:
    return Evidence(h["cosine"], h["lexical"], h["coverage"], h["background"], h.get("lead", 0.0))


def fit_curves(rows: list[dict[str, Any]], paraphrases: list[dict[str, Any]]) -> Calibration:
    """The default model's curves fitted on ``rows`` (see the module docstring) and the
    paraphrase development set ``paraphrases`` (``paraphrases.collect()``):

    - the word-leaning curve: a logistic regression over cosine, lexical, coverage and the
      margin over the background, hit level (an evidence turn of an on-topic question is 1,
      any other hit 0, balanced classes); its gate and floor keep KEEP of the on-topic R@10;
    - the semantic curve over the lead: its slope a logistic regression of "the memory
      asked for" on the lead over the paraphrase set's hits; its crossing of the gate the
      99th percentile of the best lead among the off-topic queries of ``rows`` that the
      first curve silences (it lets through at most 1 % of them)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = [_features(h) for r in rows for h in r["hits"]]
    y = [int(h["id"] in set(r["evidence"])) for r in rows for h in r["hits"]]
    model = LogisticRegression(class_weight="balanced", C=1.0, max_iter=1000).fit(np.array(x), np.array(y))
    c, b = model.coef_[0], float(model.intercept_[0])
    words = Calibration(cosine=float(c[0]), lexical=float(c[1]), coverage=float(c[2]), intercept=b,
                        min_relevance=0.0, abstain_below=None, margin=float(c[3]))
    for r in rows:
        for h in r["hits"]:
            h["fit"] = relevance(_evidence(h), calibration=words)
    # Rounded down: a threshold rounded up would keep less than KEEP.
    gate = math.floor(tune(rows, "fit", gate=True) * 1000) / 1000
    floor = math.floor(tune(rows, "fit") * 1000) / 1000
    silenced = [max((h["lead"] for h in r["hits"]), default=0.0) for r in rows
                if r["kind"] != "on-topic" and not any(h["fit"] >= gate for h in r["hits"])]
    crossing = float(np.percentile(silenced, 99)) if silenced else 1.0
    px = [[h["lead"]] for r in paraphrases for h in r["hits"]]
    py = [int(h["right"]) for r in paraphrases for h in r["hits"]]
    slope = float(LogisticRegression(class_weight="balanced", C=1e6, max_iter=1000)  # one feature: unregularised
                  .fit(np.array(px), np.array(py)).coef_[0][0])
    intercept = math.log(gate / (1.0 - gate)) - slope * crossing
    return words._replace(min_relevance=floor, abstain_below=gate, lead_weight=slope, lead_intercept=intercept)


def fit(rows: list[dict[str, Any]], paraphrases: list[dict[str, Any]]) -> None:
    c = fit_curves(rows, paraphrases)
    print(f"E5_CALIBRATION = Calibration(cosine={c.cosine:.3f}, lexical={c.lexical:.3f}, coverage={c.coverage:.3f}, "
          f"intercept={c.intercept:.3f},\n    min_relevance={c.min_relevance:.3f}, abstain_below={c.abstain_below:.3f}, "
          f"margin={c.margin:.3f}, lead_weight={c.lead_weight:.3f}, lead_intercept={c.lead_intercept:.3f})"
          f"  # the default model's, in beeweave_core/relevance.py (the lead crosses the gate at "
          f"{(math.log(c.abstain_below / (1 - c.abstain_below)) - c.lead_intercept) / c.lead_weight:.4f})")


def leave_one_out(rows: list[dict[str, Any]], paraphrases: list[dict[str, Any]]) -> None:
    """Each conversation's queries read on the curves and thresholds fitted on the other
    conversations (and the paraphrase set), the table printed over all of them: the
    held-out relevance of a hit is stored as its margin over its fold's gate, plus 0.5."""
    for conv in sorted({r["conv"] for r in rows}):
        curve = fit_curves([r for r in rows if r["conv"] != conv], paraphrases)
        gate = curve.abstain_below
        assert gate is not None
        for r in rows:
            if r["conv"] == conv:
                for h in r["hits"]:
                    h["held out"] = relevance(_evidence(h), calibration=curve) - gate + 0.5
        print(f"conversation {conv} held out: gate {gate:.3f}, lead weight {curve.lead_weight:.1f}, "
              f"crossing at lead {(math.log(gate / (1 - gate)) - curve.lead_intercept) / curve.lead_weight:.4f}")


def _kept_recall(rows: list[dict[str, Any]], key: str, t: float, gate: bool = False) -> float:
    """The share of the on-topic R@10 left: hits below ``t`` dropped (a floor), or, with
    ``gate``, a query's hits all dropped when none reaches ``t`` and all kept otherwise."""
    on = [r for r in rows if r["kind"] == "on-topic"]
    full = sum(recall_at_k([h["id"] for h in r["hits"]], r["evidence"], K) for r in on)
    if gate:
        kept = sum(recall_at_k([h["id"] for h in r["hits"]], r["evidence"], K) for r in on
                   if any(h[key] >= t for h in r["hits"]))
    else:
        kept = sum(recall_at_k([h["id"] for h in r["hits"] if h[key] >= t], r["evidence"], K) for r in on)
    return kept / full if full else 0.0


def tune(rows: list[dict[str, Any]], key: str, gate: bool = False) -> float:
    """The highest threshold (among the observed values) that keeps KEEP of the on-topic R@10."""
    values = sorted({h[key] for r in rows if r["kind"] == "on-topic" for h in r["hits"]})
    lo, hi = 0, len(values) - 1
    while lo < hi:  # kept recall falls as the threshold rises: bisect for the last that keeps KEEP
        mid = (lo + hi + 1) // 2
        if _kept_recall(rows, key, values[mid], gate) >= KEEP:
            lo = mid
        else:
            hi = mid - 1
    return values[lo]


def measure(rows: list[dict[str, Any]], key: str, t: float, gate: bool = False) -> dict[str, float]:
    off = [r for r in rows if r["kind"] != "on-topic"]
    tp = fp = fn = 0
    for r in rows:
        ev = set(r["evidence"])
        truth = any(h["id"] in ev for h in r["hits"])
        said = any(h[key] >= t for h in r["hits"])
        tp += truth and said
        fp += said and not truth
        fn += truth and not said
    silent = {kind: sum(not any(h[key] >= t for h in r["hits"]) for r in off if r["kind"] == kind) /
              max(1, sum(r["kind"] == kind for r in off)) for kind in ("swapped", "generic")}
    return {"threshold": t, "kept_r10": _kept_recall(rows, key, t, gate),
            "silent_off": sum(not any(h[key] >= t for h in r["hits"]) for r in off) / len(off),
            "silent_swapped": silent["swapped"], "silent_generic": silent["generic"],
            "precision": tp / (tp + fp) if tp + fp else 0.0, "recall": tp / (tp + fn) if tp + fn else 0.0}


def report(rows: list[dict[str, Any]]) -> None:
    counts = {kind: sum(r["kind"] == kind for r in rows) for kind in ("on-topic", "swapped", "generic")}
    print(f"queries: {counts}")
    print("| score | threshold | on-topic R@10 kept | off-topic silent | swapped silent | generic silent "
          "| precision | recall |")
    print("|---|---|---|---|---|---|---|---|")
    lines = [("relevance gate (DEFAULT_ABSTAIN_BELOW)", "relevance", DEFAULT_ABSTAIN_BELOW, True),
             ("relevance gate (tuned here)", "relevance", None, True),
             ("relevance floor (DEFAULT_MIN_RELEVANCE)", "relevance", DEFAULT_MIN_RELEVANCE, False),
             ("relevance floor (tuned here)", "relevance", None, False), ("raw cosine", "cosine", None, False),
             ("raw BM25", "bm25", None, False), ("old fused score", "score", None, False)]
    if all("held out" in h for r in rows for h in r["hits"]):
        lines.insert(1, ("relevance gate, leave-one-conversation-out", "held out", 0.5, True))
    for label, key, t, gate in lines:
        m = measure(rows, key, tune(rows, key, gate) if t is None else t, gate)
        print(f"| {label} | {m['threshold']:.3f} | {m['kept_r10']:.3f} | {m['silent_off']:.3f} | "
              f"{m['silent_swapped']:.3f} | {m['silent_generic']:.3f} | {m['precision']:.3f} | {m['recall']:.3f} |")


def without_answerable(rows: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """``rows`` less the swapped questions that ``path`` judges answered by the conversation asked."""
    keys = set(json.loads(path.read_text())["answerable"])
    swapped = [r for r in rows if r["kind"] == "swapped"]
    if any("source" not in r for r in swapped):
        raise SystemExit("--answerable needs features collected by this version (they name each question's source)")
    out = [r for r in rows if r["kind"] != "swapped" or f"{r['conv']}<-{r['source']}" not in keys]
    print(f"\nWithout the {len(rows) - len(out)} swapped questions {path.name} judges answerable:")
    return out


def dump(rows: list[dict[str, Any]], data_dir: Path, path: Path) -> None:
    """The swapped questions that pass the default gate, with their top three hits, to ``path``."""
    convs, _ = load_locomo(data_dir)
    text = {(c.conv_id, t.dia_id): t.content for c in convs for t in c.turns}
    out = [{"key": f"{r['conv']}<-{r['source']}", "query": r["query"],
            "hits": [{"content": text[r["conv"], h["id"]], "relevance": round(h["relevance"], 3)}
                     for h in sorted(r["hits"], key=lambda h: -h["relevance"])[:3]]}
           for r in rows if r["kind"] == "swapped" and any(h["relevance"] >= DEFAULT_ABSTAIN_BELOW for h in r["hits"])]
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(out)} passing swapped questions written to {path}", file=sys.stderr)


def small_stores(data_dir: Path, sizes: list[str], per_conv: int) -> None:
    """The gate in small stores (see the module docstring, ``--small-stores``)."""
    import random

    import numpy as np

    convs, questions = load_locomo(data_dir)
    embedder = as_embedder(None)  # the default model
    rnd = random.Random(0)
    names = {c.conv_id: _speakers(c.turns) for c in convs}
    by_conv = {c.conv_id: [q for q in questions if q.conv_id == c.conv_id] for c in convs}
    rows: list[tuple[str, str, float, float]] = []  # size, kind, best relevance, R@10
    for conv in convs:
        turns = {t.dia_id: t for t in conv.turns}
        ids = list(turns)
        vectors = dict(zip(ids, embedder.embed_documents([turns[i].content for i in ids]), strict=True))
        on = rnd.sample([q for q in by_conv[conv.conv_id] if all(e in turns for e in q.evidence)], per_conv)
        off = [_swap(q.question, names[o.conv_id], names[conv.conv_id])
               for o in convs if o.conv_id != conv.conv_id for q in by_conv[o.conv_id][:per_conv]]
        off = rnd.sample([*off, *GENERIC], per_conv)
        qvec = {t: embedder.embed_query(t) for t in [*(q.question for q in on), *off]}

        def ask(store: list[str], query: str) -> list[Any]:
            with BeeWeave(embedder=embedder) as memory:
                memory.add_many([{"content": turns[i].content, "user_id": "u", "chunk_id": i,
                                  "timestamp": turns[i].timestamp, "embedding": vectors[i]} for i in store],
                                show_progress=False, trusted=True)
                return memory.search(query, user_id="u", k=K, query_embedding=qvec[query], abstain_below=0)

        for size in sizes:
            n = len(ids) if size == "all" else int(size)
            for q in on:
                if len(q.evidence) > n:
                    continue
                rest = [i for i in ids if i not in q.evidence]
                hits = ask([*q.evidence, *rnd.sample(rest, n - len(q.evidence))], q.question)
                rows.append((size, "on", max((h.relevance or 0.0 for h in hits), default=0.0),
                             recall_at_k([h.id for h in hits], q.evidence, K)))
            for text in off:
                hits = ask(rnd.sample(ids, n), text)
                rows.append((size, "off", max((h.relevance or 0.0 for h in hits), default=0.0), 0.0))
        print(f"conversation {conv.conv_id}: searched", file=sys.stderr, flush=True)
    print("| memories | on-topic | off-topic | gate keeping 95 % | off-topic silent there | "
          f"kept at {DEFAULT_ABSTAIN_BELOW} | silent at {DEFAULT_ABSTAIN_BELOW} |")
    print("|---|---|---|---|---|---|---|")
    for size in sizes:
        best = np.array([r[2] for r in rows if r[0] == size and r[1] == "on"])
        rec = np.array([r[3] for r in rows if r[0] == size and r[1] == "on"])
        off_best = np.array([r[2] for r in rows if r[0] == size and r[1] == "off"])

        def kept(t: float, best: Any = best, rec: Any = rec) -> float:
            return float(rec[best >= t].sum() / rec.sum())

        gate = max((t for t in sorted(set(best.tolist())) if kept(t) >= KEEP), default=0.0)
        print(f"| {size} | {len(best)} | {len(off_best)} | {gate:.3f} | {np.mean(off_best < gate):.3f} | "
              f"{kept(DEFAULT_ABSTAIN_BELOW):.3f} | {np.mean(off_best < DEFAULT_ABSTAIN_BELOW):.3f} |")


def main(argv: list[str]) -> None:
    args = list(argv)
    do_fit = "--fit" in args
    if do_fit:
        args.remove("--fit")
    loo = "--leave-one-out" in args
    if loo:
        args.remove("--leave-one-out")
    cache = None
    answerable = None
    dump_to = None
    per_conv = 40
    sizes = None
    if "--features" in args:
        i = args.index("--features")
        cache = Path(args[i + 1])
        del args[i : i + 2]
    if "--answerable" in args:
        i = args.index("--answerable")
        answerable = Path(args[i + 1])
        del args[i : i + 2]
    if "--dump" in args:
        i = args.index("--dump")
        dump_to = Path(args[i + 1])
        del args[i : i + 2]
    if "--per-conv" in args:
        i = args.index("--per-conv")
        per_conv = int(args[i + 1])
        del args[i : i + 2]
    if "--small-stores" in args:
        i = args.index("--small-stores")
        sizes = args[i + 1].split(",")
        del args[i : i + 2]
    data_dir = Path(args[0]) if args else DEFAULT_DATA_DIR
    if sizes is not None:
        small_stores(data_dir, sizes, per_conv)
        return
    fresh = cache is None or not cache.exists()
    if not fresh:
        assert cache is not None
        rows = json.loads(cache.read_text())
        for r in rows:  # cached under an older curve, maybe: read it again from the features
            for h in r["hits"]:
                h["relevance"] = relevance(_evidence(h))
    else:
        rows = collect(data_dir, per_conv, cache)
        if cache is not None:
            cache.write_text(json.dumps(rows))
    if do_fit or loo:
        from paraphrases import collect as paraphrase_rows
        from paraphrases import report as paraphrase_report

        paraphrases = paraphrase_rows()
    if do_fit:
        fit(rows, paraphrases)
        return
    # The engine's relevance must be the curve's on these features (no drift between the two).
    for r in rows if fresh else []:
        for h in r["hits"]:
            want = relevance(_evidence(h))
            assert abs(want - h["relevance"]) < 1e-9, (r["query"], h)
    if loo:
        leave_one_out(rows, paraphrases)
        print(f"paraphrase set (benchmarks/paraphrases.py) at the default gate: "
              f"{paraphrase_report(paraphrases, DEFAULT_ABSTAIN_BELOW)}")
    report(rows)
    if answerable is not None:
        report(without_answerable(rows, answerable))
    if dump_to is not None:
        dump(rows, data_dir, dump_to)


if __name__ == "__main__":
    main(sys.argv[1:])
