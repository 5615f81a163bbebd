"""What the per-face scope tests (tests/*/test_*_scopes.py) share: one memory of the tenant,
one of a project granted to alice, one private memory each of alice and bob."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.scopes import ScopeConfig, scope_owner
from tests.support import frozen_clock

TENANT_FACT = "Refunds for the staging plan are paid within five working days."
PROJECT_FACT = "The staging parser of project atlas reads precedence with a Pratt loop."
ALICE_FACT = "Alice keeps her staging notes in a blue notebook."
BOB_FACT = "Bob's staging password hint is the name of his dog."


@contextmanager
def scoped_memory() -> Iterator[BeeWeave]:
    """An in-memory store (the instant hashing embedder, a still clock) holding the four facts,
    with ``project:atlas`` granted to alice."""
    with BeeWeave(embedder=HashingEmbedder(32), clock=frozen_clock,
                  scopes=ScopeConfig(grants={"alice": ["project:atlas"]})) as m:
        m.add(TENANT_FACT, user_id=scope_owner("tenant"))
        m.add(PROJECT_FACT, user_id=scope_owner("project:atlas"))
        m.add(ALICE_FACT, user_id="alice")
        m.add(BOB_FACT, user_id="bob")
        yield m
