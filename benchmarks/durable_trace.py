"""90 simulated days of an agent's memory with the default settings: what is learned stays.

Usage:
    python benchmarks/durable_trace.py [--days 90] [--embedder default|hashing]

Day 0: an operations agent learns 24 facts through ingested runs (question and answer), three
more arrive backfilled three days late, and four time-sensitive ones (today's weather, a
price, an exchange rate, a lunch special) are stored. Each day the agent asks about the first
six facts and its answer draws on them (the "used" feedback the faces' attribution gives);
the other eighteen are never asked again. Measuring searches run on a copy of the store. Each day
ends with ``maintain()``; the store is closed and reopened on the days measured.

Printed per measured day: the share of the learned facts (never used / used / backfilled)
still found in the top 5 for their question, of the never-used ones still first, of six
questions that a used and an unused fact both answer where the used one ranks first, and of
the time-sensitive statements archived. Nothing here is tuned:
the store runs its defaults (the default tiers, the default model unless ``--embedder``).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from beeweave_core import BeeWeave, ChunkStatus, HashingEmbedder

USER = "ops"
# (question, answer): what an operations agent is told once.
FACTS = [
    ("Which format should the weekly report use?", "Use the Markdown template with a summary table first."),
    ("Which port does the billing API use?", "The billing API listens on port 8443 behind the gateway."),
    ("Who approves production deploys?", "Production deploys are approved by the release manager, Dana."),
    ("Where are database backups stored?", "Database backups go to the cold-storage bucket in Frankfurt."),
    ("How long do we keep access logs?", "Access logs are kept for 180 days, then deleted."),
    ("What is the staging server's hostname?", "The staging server is stage-02.internal."),
    ("Which Python version do services run?", "All services run Python 3.11 in their containers."),
    ("Where is the incident postmortem template?", "The postmortem template is in the wiki under Templates."),
    ("What timezone do the nightly jobs use?", "Nightly jobs are scheduled in UTC, never local time."),
    ("Which team owns the search service?", "The search service is owned by the discovery team."),
    ("How are secrets rotated?", "Secrets are rotated every 90 days by the vault job."),
    ("What is the SLA for the payments API?", "The payments API promises 99.95 percent monthly uptime."),
    ("Which channel gets paging alerts?", "Paging alerts go to the #ops-pager channel."),
    ("Which load balancer fronts the web tier?", "The web tier sits behind the HAProxy pair lb-1 and lb-2."),
    ("How do I request a new VM?", "New VMs are requested through the infra form, approved within a day."),
    ("What is the code freeze period?", "Code freezes run from December 20 to January 3."),
    ("Which metrics system do we use?", "Metrics are scraped by Prometheus and shown in Grafana."),
    ("Where do feature flags live?", "Feature flags live in the flags service, edited through its console."),
    ("How big can an upload be?", "Uploads are limited to 50 megabytes per file."),
    ("Which CI runner builds the mobile app?", "The mobile app builds on the macOS runners only."),
    ("Who is the contact at the data center?", "The data center contact is Ravi at extension 4410."),
    ("What is the default branch name?", "Every repository's default branch is main."),
    ("How are customer exports delivered?", "Customer exports are delivered as signed links valid for 7 days."),
    ("What cache do the APIs use?", "The APIs cache responses in Redis with a 5 minute TTL."),
]
BACKFILLED = [
    ("Where are the on-call runbooks kept?", "The on-call runbooks are kept in the ops wiki under OnCall."),
    ("Which DNS provider do we use?", "Our DNS is hosted at the provider's managed zones, changed by ticket."),
    ("What is the VPN's address?", "The VPN gateway is vpn.example.net on port 443."),
]
TIME_SENSITIVE = ["Today's weather is sunny, 24 degrees.", "The stock price is 190 dollars today.",
                  "The exchange rate today is 1.08 dollars per euro.", "Today's lunch special is ramen."]
USED = 6  # the first USED facts are asked about every day
MEASURED = (1, 2, 7, 30, 60, 90)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def _rank(m: BeeWeave, question: str, cid: str) -> int | None:
    """Where ``cid`` is in the top 5 for ``question`` (1 = first), None when it is not."""
    ids = [h.id for h in m.search(question, user_id=USER, k=5)]
    return ids.index(cid) + 1 if cid in ids else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--days", type=int, default=90)
    p.add_argument("--embedder", choices=["default", "hashing"], default="default")
    args = p.parse_args()
    clock = Clock()
    path = Path(tempfile.mkdtemp()) / "trace.db"
    embedder = HashingEmbedder(384) if args.embedder == "hashing" else None

    def open_store(at: Path = path) -> BeeWeave:
        return BeeWeave(at, embedder=embedder, clock=clock)

    m = open_store()
    ids = []
    for i, (q, a) in enumerate(FACTS + BACKFILLED):
        late = timedelta(days=3) if i >= len(FACTS) else timedelta(0)
        m.ingest({"id": f"fact-{i}", "user_id": USER, "query": q, "response": a,
                  "timestamp": (clock.now - late).isoformat()})
        ids.append(f"fact-{i}@{USER}:0")
    sensitive = [m.add(t, user_id=USER) for t in TIME_SENSITIVE]
    assert m.flush(120)
    missing = [cid for cid in ids if not m.backend.contains([cid])]
    if missing:
        raise SystemExit(f"not stored (admission or small talk?): {missing}")
    questions = [q for q, _ in FACTS + BACKFILLED]
    print("| day | never used found | never used first | used found | backfilled found | used before unused "
          "| time-sensitive archived |")
    print("|---|---|---|---|---|---|---|")
    for day in range(1, args.days + 1):
        clock.now += timedelta(days=1)
        for q, cid in zip(questions[:USED], ids[:USED]):
            # A use, as the faces record one: the answer drew on the memory (attribution's
            # "used" feedback). A search alone is a reading, which changes no later ranking.
            if cid in [h.id for h in m.search(q, user_id=USER, k=5)]:
                m.feedback(cid, "used")
        m.maintain()
        if day not in MEASURED:
            continue
        # Measured on a copy: the measuring searches are uses too, and must not lift the
        # never-used facts of the store that goes on.
        m.close()
        copy = Path(tempfile.mkdtemp()) / "copy"
        shutil.copytree(path.parent, copy)
        m = open_store(copy / path.name)
        ranks = [_rank(m, q, c) for q, c in zip(questions[USED:len(FACTS)], ids[USED:len(FACTS)])]
        never = [r is not None for r in ranks]
        first = [r == 1 for r in ranks]
        used = [_rank(m, q, c) is not None for q, c in zip(questions[:USED], ids[:USED])]
        late = [_rank(m, q, c) is not None for q, c in zip(questions[len(FACTS):], ids[len(FACTS):])]
        # A question both a used and an unused fact answer: does use lift the used one?
        before = 0
        for u, n in zip(range(USED), range(USED, 2 * USED)):
            hits = [h.id for h in m.search(f"{FACTS[u][1]} {FACTS[n][1]}", user_id=USER, k=10, abstain_below=0)]
            before += int(ids[u] in hits and (ids[n] not in hits or hits.index(ids[u]) < hits.index(ids[n])))
        gone = sum(m.get(c).status is not ChunkStatus.ACTIVE for c in sensitive)
        print(f"| {day} | {sum(never)}/{len(never)} | {sum(first)}/{len(first)} | {sum(used)}/{len(used)} "
              f"| {sum(late)}/{len(late)} "
              f"| {before}/{USED} | {gone}/{len(sensitive)} |")
        m.close()
        shutil.rmtree(copy.parent)
        m = open_store()
    m.close()


if __name__ == "__main__":
    main()
