"""What the per-face relevance tests (tests/*/test_*_relevance_default.py) share: the same
memories and questions, and a store with the default configuration, whose gate is its
model's tuned one (the default model's ``DEFAULT_ABSTAIN_BELOW``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from beeweave_core import BeeWeave, SearchConfig

FACTS = ["I am allergic to peanuts.", "Staging listens on port 5433."]
OFF_TOPIC = ["How far is the Moon?", "What is the boiling point of water?"]
ON_TOPIC = "What am I allergic to?"
GATED = SearchConfig()  # the default configuration: the store's model's tuned gate applies


@contextmanager
def gated_memory(*texts: str) -> Iterator[BeeWeave]:
    """An in-memory store with the default model and configuration (so its model's tuned gate),
    holding ``texts`` as alice's memories."""
    with BeeWeave(config=GATED) as m:
        for text in texts:
            m.add(text, user_id="alice")
        yield m
