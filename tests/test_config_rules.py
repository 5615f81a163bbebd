"""Configuration in one place per concern (issue 45 item 7): each class checks its fields from a
rules table (``beeweave_core.config_rules``), so a bad value fails when the configuration is made,
with an InvalidInputError naming the class, the field and what it must be."""

from __future__ import annotations

import pytest

import beeweave_core
from beeweave_core import IndexConfig, InvalidInputError, NetworkConfig, SearchConfig
from beeweave_core.fusion import FusionMode


def test_index_and_network_configs_live_beside_their_parts_and_old_imports_still_work() -> None:
    from beeweave_core.engine.config import NetworkConfig as Network
    from beeweave_core.index.config import IndexConfig as Index
    from beeweave_core.index.context import IndexConfig as OldIndex
    from beeweave_core.network import NetworkConfig as OldNetwork

    assert Index is OldIndex is IndexConfig is beeweave_core.IndexConfig
    assert Network is OldNetwork is NetworkConfig is beeweave_core.NetworkConfig
    with pytest.raises(AttributeError):
        beeweave_core.network.NoSuchConfig  # noqa: B018 - the lazy lookup knows one old name only


@pytest.mark.parametrize(("cls", "bad", "message"), [
    (SearchConfig, dict(candidates=0), "SearchConfig.candidates must be an integer >= 1, got 0"),
    (SearchConfig, dict(rrf_k=0), "SearchConfig.rrf_k must be a number > 0"),
    (SearchConfig, dict(fusion="mean"), "SearchConfig.fusion must be one of 'zscore', 'rrf', 'weighted'"),
    (SearchConfig, dict(weights={"lexical": -1.0}), "SearchConfig.weights['lexical'] must be a number >= 0"),
    (SearchConfig, dict(weights={"bm25": 1.0}), "SearchConfig.weights must be a dict of 'lexical' and 'vector'"),
    (SearchConfig, dict(min_relevance=1.5), "SearchConfig.min_relevance must be a number in [0, 1] or None"),
    (SearchConfig, dict(time_words="yes"), "SearchConfig.time_words must be True or False"),
    (NetworkConfig, dict(semantic_k=-1), "NetworkConfig.semantic_k must be an integer >= 0"),
    (NetworkConfig, dict(semantic_threshold=2.0), "NetworkConfig.semantic_threshold must be a number in [-1, 1]"),
    (NetworkConfig, dict(max_shared_links=2.5), "NetworkConfig.max_shared_links must be an integer >= 0"),
    (IndexConfig, dict(b=1.5), "IndexConfig.b must be a number in [0, 1], got 1.5"),
    (IndexConfig, dict(k1=float("nan")), "IndexConfig.k1 must be a number >= 0"),
    (IndexConfig, dict(context_radius=True), "IndexConfig.context_radius must be an integer >= 0"),
    (IndexConfig, dict(session_context="sometimes"), "IndexConfig.session_context must be one of 'auto', 'all'"),
])
def test_a_bad_value_is_refused_with_the_class_the_field_and_the_rule(cls, bad, message) -> None:
    with pytest.raises(InvalidInputError) as err:
        cls(**bad)
    assert str(err.value).startswith(message), str(err.value)


def test_good_values_are_kept_and_enum_values_become_members() -> None:
    cfg = SearchConfig(fusion="rrf", weights={"lexical": 2, "vector": 0.5}, min_relevance=0, abstain_below=None)
    assert cfg.fusion is FusionMode.RRF and cfg.weights == {"lexical": 2, "vector": 0.5}
    assert NetworkConfig(semantic_k=0, semantic_threshold=-1).semantic_k == 0
    assert IndexConfig(session_context="all").to_dict()["session_context"] == "all"
