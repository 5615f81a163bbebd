"""A store opened read-only (a read replica) counts no accesses: its searches queue
nothing, write nothing in the background, and its flush and close do not fail."""

from __future__ import annotations

import logging
import time

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.store.postgres import PostgresStore
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

pytestmark = pytest.mark.slow


def test_searches_on_a_read_only_store_count_no_accesses(pg_url, caplog) -> None:  # noqa: F811
    caplog.set_level(logging.DEBUG)
    tenant, emb = new_tenant("replica"), HashingEmbedder(64)
    interval = 0.3
    primary = BeeWeave(backend=PostgresStore(pg_url, tenant=tenant), embedder=emb,
                       lifecycle=LifecycleConfig(access_flush_interval=interval))
    try:
        kept = primary.add("the staging cluster restarts at midnight", user_id="u")
        short = primary.add("the deploy freeze starts on friday", user_id="u", tier="short")
        primary.search("staging cluster", user_id="u", k=5)
        primary.flush()
        before = {i: primary.get(i).access_count for i in (kept, short)}
        reader = BeeWeave(backend=PostgresStore(pg_url, tenant=tenant, read_only=True), embedder=emb,
                          lifecycle=LifecycleConfig(access_flush_interval=interval))
        try:
            for _ in range(8):  # enough uses to promote the short-term memory, were they counted
                hits = reader.search("staging cluster deploy freeze", user_id="u", k=5)
                assert {kept, short} <= {h.id for h in hits}
            assert reader._lifecycle.access.pending() == 0
            time.sleep(interval * 4)  # past the batch interval: no background write was due
            reader.flush()
        finally:
            reader.close()
        after = {i: primary.get(i).access_count for i in (kept, short)}
        assert after == before and primary.get(short).tier.value == "short"
        assert not [r for r in caplog.records if "writing access counts failed" in r.getMessage()]
        primary.search("staging cluster", user_id="u", k=5)  # the primary's searches still count
        primary.flush()
        assert primary.get(kept).access_count == before[kept] + 1
    finally:
        primary.close()
