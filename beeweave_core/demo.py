"""The embedded-default demo: store a short agent conversation, then ask it back.

Runs offline with the default multilingual-e5-small and an in-memory store:
``python -m beeweave_core.demo`` (or ``beeweave demo``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from .memory import BeeWeave

CONVERSATION = [
    ("user", "I'm planning a trip to Kyoto in early April with my sister Mei."),
    ("tool", "weather_forecast(city='Kyoto', month='April') -> mild, 9-19 °C, rain on about 8 days"),
    ("agent", "Cherry blossoms in Kyoto usually peak between April 1 and April 10, so early April is a good time."),
    ("user", "Mei is vegetarian, so every restaurant you suggest needs vegetarian dishes."),
    ("tool", "hotel_search(city='Kyoto', nights=4) -> Hotel Granvia Kyoto, 18,000 JPY per night, next to the station"),
    ("agent", "I booked Hotel Granvia Kyoto for April 4-8; the confirmation code is KX-2231."),
    ("user", "我们的预算是每晚不超过两万日元，另外我对花生过敏。"),
    ("agent", "好的，我会只推荐不含花生的餐厅，并且酒店预算控制在每晚两万日元以内。"),
]

QUESTIONS = [
    "Who is travelling with me?",
    "What food restrictions should restaurant suggestions respect?",
    "Which hotel did you book and what is the confirmation code?",
    "When do the cherry blossoms peak?",
    "我对什么过敏？",
]


def main(argv: list[str] | None = None) -> int:
    # A program (unlike the library) may set these: never reach for the network,
    # and keep the model loader's progress bars out of the demo's output.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "demo-memory.db"
        t0 = time.perf_counter()
        with BeeWeave(path) as memory:
            memory.add_many([
                {"content": f"{role}: {text}", "user_id": "alice", "session_id": "trip-planning",
                 "agent_id": "travel-agent", "tags": [role]}
                for role, text in CONVERSATION
            ])
            print(f"stored {memory.count()} memories of one agent session in {time.perf_counter() - t0:.1f}s "
                  f"(model: {memory.embedder.name})\n")
        # Reopen: the memory outlives the process that wrote it.
        with BeeWeave(path) as memory:
            for q in QUESTIONS:
                t = time.perf_counter()
                hits = memory.search(q, user_id="alice", k=2)
                ms = (time.perf_counter() - t) * 1000
                print(f"Q: {q}   ({ms:.0f} ms)")
                for h in hits:
                    print(f"   {h.relevance or 0.0:.3f}  {h.chunk.raw_content}")
                if not hits:  # said, not left blank: the relevance gate judged nothing relevant enough
                    print("   (no memory reached the relevance gate; search(..., abstain_below=0) shows the closest)")
                print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
