"""Memory lifecycle: feedback and reinforcement, decay, access tracking, dedup and merge,
expiry and forgetting, facts with versions, opinions and conflicts (issue 5).

``BeeWeave`` gets these methods through :class:`LifecycleMixin`; configure it with
``BeeWeave(..., lifecycle=LifecycleConfig(...))``. Ranking itself (effective weight,
stale and expiry penalties) lives in :mod:`beeweave_core.scoring`.
"""

from .config import DEFAULT_EXPIRY_RULES, ExpiryRule, FeedbackSignal, ForgetAction, LifecycleConfig, ReviewDecision
from .mixin import LifecycleMixin
from .reports import MaintenanceReport, MemoryVersion, ReviewItem

__all__ = [
    "LifecycleMixin",
    "LifecycleConfig",
    "FeedbackSignal",
    "ForgetAction",
    "ReviewDecision",
    "ExpiryRule",
    "DEFAULT_EXPIRY_RULES",
    "MaintenanceReport",
    "MemoryVersion",
    "ReviewItem",
]
