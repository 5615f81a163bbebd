"""Configuration in one place per concern (issue 45 item 7): each class checks its fields from a
rules table (``beeweave_core.config_rules``), so a bad value fails when the configuration is made,
with an InvalidInputError naming the class, the field and what it must be."""

from __future__ import annotations

import pytest

import beeweave_core
from beeweave_core import IndexConfig, InvalidInputError, NetworkConfig, SearchConfig
from beeweave_core.fusion import FusionMode


def test_index_and_network_configs_live_beside_their_parts_and_old_imports_still_work() -> None:
    from beeweave_core.engine.search_config import NetworkConfig as Network
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


def _configs() -> list[type]:
    from beeweave_core import ExpandOptions, IngestConfig, LifecycleConfig, ScopeConfig, ScoringConfig, TokenizerConfig
    from beeweave_core.ingest.admission import AdmissionRules, SourceRule
    from beeweave_core.ingest.config import PatternConfig
    from beeweave_core.lifecycle.attribution import AttributionConfig
    from beeweave_core.lifecycle.config import SessionConfig, TierConfig
    from beeweave_core.server.config import ServerConfig

    return [SearchConfig, NetworkConfig, IndexConfig, ScoringConfig, TokenizerConfig, ScopeConfig, PatternConfig,
            IngestConfig, TierConfig, SessionConfig, LifecycleConfig, AttributionConfig, ServerConfig, ExpandOptions,
            AdmissionRules, SourceRule]


# Fields that take any object on purpose, checked where they are used: a ready queue, and an
# embedder (a model name or any object that embeds) that BeeWeave resolves when a store opens.
_ANY = {("IngestConfig", "queue"), ("ServerConfig", "embedder")}


@pytest.mark.parametrize("cls", _configs(), ids=lambda c: c.__name__)
def test_no_field_takes_a_stray_object_silently(cls) -> None:
    """An object of no meaning in any field is refused with InvalidInputError (never a TypeError
    from deep inside, never accepted): every field has a rule or a check."""
    import dataclasses

    class Stray:
        pass

    required = {"store": None, "api_keys": {"k-aaaaaaaa": "acme"}} if cls.__name__ == "ServerConfig" else {}
    taken = []
    for f in dataclasses.fields(cls):
        if not f.init or (cls.__name__, f.name) in _ANY:
            continue
        try:
            cls(**{**required, f.name: Stray()})
        except InvalidInputError as exc:
            assert f.name in str(exc) or f.name.replace("_", " ") in str(exc), (f.name, str(exc))
        else:
            taken.append(f.name)
    assert not taken, f"{cls.__name__} takes any object in {taken}"


def test_the_other_classes_say_what_is_wrong_the_same_way() -> None:
    from datetime import timedelta

    from beeweave_core import IngestConfig, LifecycleConfig, ScoringConfig, TokenizerConfig
    from beeweave_core.ingest.config import PatternConfig, Window
    from beeweave_core.lifecycle.attribution import AttributionConfig
    from beeweave_core.server.config import ServerConfig
    from beeweave_core.validation import MAX_WEIGHT

    cases = [
        (lambda: LifecycleConfig(max_weight=0.01), "LifecycleConfig.max_weight must be a number in "
                                                   f"[0.05, {int(MAX_WEIGHT)}], got 0.01"),
        (lambda: LifecycleConfig(expired_action="shred"), "LifecycleConfig.expired_action must be one of 'archive', "
                                                          "'delete', got 'shred'"),
        (lambda: ScoringConfig(decay=0), "ScoringConfig.decay must be a number in (0, 1], got 0"),
        (lambda: TokenizerConfig(chinese_stopwords="v9"), "TokenizerConfig.chinese_stopwords must be one of 'v1', "
                                                          "'v2', got 'v9'"),
        (lambda: IngestConfig(when_full="spill"), "IngestConfig.when_full must be one of 'block', 'raise', "
                                                  "'drop_oldest', got 'spill'"),
        (lambda: IngestConfig(pii_kinds=["email", "shoe_size"]), "IngestConfig.pii_kinds[1] must be one of"),
        (lambda: PatternConfig(windows=[Window(timedelta(0), 3)]), "PatternConfig.windows[0] must be a Window"),
        (lambda: AttributionConfig(down_cues=("no", " ")), "AttributionConfig.down_cues[1] must be a non-empty string"),
        (lambda: ServerConfig(None, {}, read_timeout=0), "ServerConfig.read_timeout must be a number in (0, 3600]"),
    ]
    for make, message in cases:
        with pytest.raises(InvalidInputError) as err:
            make()
        assert str(err.value).startswith(message), str(err.value)
    assert LifecycleConfig(merge_on_insert=False).merge_on_insert.value == "off"  # a bool still means off/all
