"""Memory lifecycle (feedback, decay, merge, expiry, versions). Being built: see issue 5."""

from __future__ import annotations


class LifecycleMixin:
    pass
