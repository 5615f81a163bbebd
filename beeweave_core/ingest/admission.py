"""Admission: whether a new memory is active at once or waits for review.

Rules are checked in this order:

1. source rules (:class:`SourceRule`), first match wins: a trusted source is admitted
   as is (``ACTIVE``), an untrusted one always waits (``PENDING``);
2. the checks: minimum length, blocked words, positive feedback required, and any
   custom check; each failed check is a reason, and any reason means ``PENDING``;
3. otherwise ``default`` (``ACTIVE``).

A pending memory is stored with status ``pending`` (search leaves it out) and the
reasons in ``metadata["review"]``, for the reviewer to see.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from ..errors import InvalidInputError
from ..records import ChunkStatus

__all__ = ["Admission", "SourceRule", "AdmissionRules", "Candidate", "admit"]


class Admission(str, Enum):
    ACTIVE = "active"
    PENDING = "pending"


@dataclass(frozen=True)
class Candidate:
    """What admission sees of a memory about to be stored."""

    text: str
    user_id: str
    agent_id: str | None = None
    tools: tuple[str, ...] = ()  # the tool of a tool memory, or the tools a turn used
    feedback: float | None = None
    role: str = "turn"  # "turn", "tool", "document" or "pattern"


@dataclass(frozen=True)
class SourceRule:
    """Decide by source. ``None`` fields match anything; every given field must match.

    Example: ``SourceRule(agent_id="web-scraper", decision=Admission.PENDING)`` holds
    everything that agent learns for review; ``SourceRule(tool="calculator",
    decision=Admission.ACTIVE)`` trusts one tool.
    """

    decision: Admission = Admission.PENDING
    agent_id: str | None = None
    tool: str | None = None
    role: str | None = None

    def matches(self, c: Candidate) -> bool:
        return ((self.agent_id is None or c.agent_id == self.agent_id)
                and (self.tool is None or self.tool in c.tools)
                and (self.role is None or c.role == self.role))


@dataclass(frozen=True)
class AdmissionRules:
    """Which new memories need review.

    Attributes:
        min_chars: shorter memories wait for review ("ok", "thanks" are not knowledge).
        blocked_words: memories containing one wait (case-insensitive; whole words for
            Latin script, substrings for Chinese).
        require_positive_feedback: only runs rated positively (``KnowledgeEvent.feedback
            > 0``) become active at once.
        sources: :class:`SourceRule` s, first match wins, before the checks.
        checks: custom checks ``f(candidate) -> reason or None``.
        default: the decision when nothing objects.
    """

    min_chars: int = 20
    blocked_words: Sequence[str] = ()
    require_positive_feedback: bool = False
    sources: Sequence[SourceRule] = ()
    checks: Sequence[Callable[[Candidate], str | None]] = ()
    default: Admission = Admission.ACTIVE
    _blocked: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.min_chars, int) or self.min_chars < 0:
            raise InvalidInputError("min_chars must be a non-negative integer")
        if isinstance(self.blocked_words, str):
            raise InvalidInputError("blocked_words must be a list of words, not one string")
        for r in self.sources:
            if not isinstance(r, SourceRule):
                raise InvalidInputError("sources must be SourceRule objects")
        object.__setattr__(self, "default", Admission(self.default))
        words = [w.strip() for w in self.blocked_words if isinstance(w, str) and w.strip()]
        if words:
            parts = [rf"(?<![A-Za-z0-9]){re.escape(w)}(?![A-Za-z0-9])" if w.isascii() else re.escape(w) for w in words]
            object.__setattr__(self, "_blocked", re.compile("|".join(parts), re.I))


def admit(rules: AdmissionRules, c: Candidate) -> tuple[ChunkStatus, list[str]]:
    """The status for a new memory and the reasons it must wait (empty when active)."""
    for rule in rules.sources:
        if rule.matches(c):
            if rule.decision is Admission.ACTIVE:
                return ChunkStatus.ACTIVE, []
            return ChunkStatus.PENDING, [f"source rule: {_describe(rule)}"]
    reasons: list[str] = []
    size = len(c.text.strip())
    if size < rules.min_chars:
        reasons.append(f"too short ({size} < {rules.min_chars} characters)")
    if rules._blocked is not None:
        hit = rules._blocked.search(c.text)
        if hit is not None:
            reasons.append(f"blocked word {hit.group(0)!r}")
    if rules.require_positive_feedback and not (c.feedback is not None and c.feedback > 0):
        reasons.append("no positive feedback")
    for check in rules.checks:
        reason = check(c)
        if reason:
            reasons.append(str(reason))
    if reasons or rules.default is Admission.PENDING:
        return ChunkStatus.PENDING, reasons or ["review required by default"]
    return ChunkStatus.ACTIVE, []


def _describe(rule: SourceRule) -> str:
    parts = [f"{k}={getattr(rule, k)!r}" for k in ("agent_id", "tool", "role") if getattr(rule, k) is not None]
    return ", ".join(parts) or "any source"
