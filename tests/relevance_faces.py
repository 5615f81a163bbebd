"""What the per-face relevance tests (tests/*/test_*_relevance_default.py) share: the same
memories and questions, and a store whose default gate is the default model's tuned one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from beeweave_core import BeeWeave, SearchConfig
from beeweave_core.relevance import DEFAULT_ABSTAIN_BELOW

FACTS = ["I am allergic to peanuts.", "Staging listens on port 5433."]
OFF_TOPIC = ["How far is the Moon?", "What is the boiling point of water?"]
ON_TOPIC = "What am I allergic to?"
GATED = SearchConfig(abstain_below=DEFAULT_ABSTAIN_BELOW)  # the default model's tuned gate as the store's default


@contextmanager
def gated_memory(*texts: str) -> Iterator[BeeWeave]:
    """An in-memory store with the default model, its tuned gate the store's default, holding
    ``texts`` as alice's memories."""
    with BeeWeave(config=GATED) as m:
        for text in texts:
            m.add(text, user_id="alice")
        yield m
