"""Memory lifecycle: feedback and reinforcement, decay, access tracking, dedup and merge,
expiry and forgetting, facts with versions, opinions and conflicts (issue 5).

``BeeWeave`` delegates to the :class:`Lifecycle` part; configure it with
``BeeWeave(..., lifecycle=LifecycleConfig(...))``. Ranking itself (effective weight,
stale and expiry penalties) lives in :mod:`beeweave_core.scoring`.
"""

from .config import (
    DEFAULT_EXPIRY_RULES,
    ExpiryRule,
    FeedbackSignal,
    ForgetAction,
    LifecycleConfig,
    MergeOnInsert,
    ReviewDecision,
    SessionConfig,
    TierConfig,
)
from .lifecycle import Lifecycle
from .provenance import Lineage
from .reports import MaintenanceReport, MemoryVersion, ReviewItem
from .schedule import MaintenanceSchedule
from .validity import InvalidationReport

__all__ = [
    "Lifecycle",
    "LifecycleConfig",
    "TierConfig",
    "MergeOnInsert",
    "SessionConfig",
    "FeedbackSignal",
    "ForgetAction",
    "ReviewDecision",
    "ExpiryRule",
    "DEFAULT_EXPIRY_RULES",
    "MaintenanceReport",
    "MaintenanceSchedule",
    "Lineage",
    "InvalidationReport",
    "MemoryVersion",
    "ReviewItem",
]
