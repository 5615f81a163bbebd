"""Admission: whether a new memory is active at once or waits for review.

Rules are checked in this order:

1. source rules (:class:`SourceRule`), first match wins: a trusted source is admitted
   as is (``ACTIVE``), an untrusted one always waits (``PENDING``); a rule with a
   minimum confidence or importance holds what is below it from that source for review
   and lets the rest go on to the checks;
2. the checks: minimum length (of conversation turns, tool outputs and patterns; a
   memory a caller writes directly is as long as the caller means it, and a turn that
   states a fact about the user, "I live in Berlin", is short by nature), blocked words,
   positive feedback required, minimum confidence and importance, and any custom
   check; each failed check is a reason, and any reason means ``PENDING``;
3. otherwise ``default`` (``ACTIVE``).

A pending memory is stored with status ``pending`` (search leaves it out) and the
reasons in ``metadata["review"]``, for the reviewer to see.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from ..config_rules import FLAG, TEXT, Choice, Instance, Is, Items, Number, Rule, check_fields
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
    role: str = "turn"  # "turn", "tool", "document", "pattern" or "manual" (BeeWeave.add)
    confidence: float | None = None  # in [0, 1]; None: not stated
    importance: float | None = None  # in [0, 1]; None: not stated
    states_fact: bool = False  # the user said something about themselves ("我住在北京"): short by nature


@dataclass(frozen=True)
class SourceRule:
    """Decide by source. ``None`` fields match anything; every given field must match.

    Example: ``SourceRule(agent_id="web-scraper", decision=Admission.PENDING)`` holds
    everything that agent learns for review; ``SourceRule(tool="calculator",
    decision=Admission.ACTIVE)`` trusts one tool; ``SourceRule(role="turn",
    min_confidence=0.7, min_importance=0.6)`` holds turns extracted with a confidence
    below 0.7 or an importance below "medium" (an unstated value counts as below).
    """

    decision: Admission = Admission.PENDING
    agent_id: str | None = None
    tool: str | None = None
    role: str | None = None
    min_confidence: float | None = None
    min_importance: float | None = None

    @property
    def thresholds(self) -> bool:
        """A rule with a minimum holds only what is below it; the rest is not decided here."""
        return self.min_confidence is not None or self.min_importance is not None

    def __post_init__(self) -> None:
        check_fields(self, _SOURCE_RULES)

    def matches(self, c: Candidate) -> bool:
        return ((self.agent_id is None or c.agent_id == self.agent_id)
                and (self.tool is None or self.tool in c.tools)
                and (self.role is None or c.role == self.role))


@dataclass(frozen=True)
class AdmissionRules:
    """Which new memories need review.

    Attributes:
        min_chars: shorter memories wait for review ("ok", "thanks" are not knowledge). Length is
            counted in display columns: a Chinese, Japanese or Korean character (East Asian
            wide or fullwidth) counts as two, since one carries about what two Latin letters
            do (你住在杭州西湖区 says more than "In Hangzhou").
        min_chars_roles: the roles ``min_chars`` applies to.
        min_confidence, min_importance: memories whose stated confidence / importance is
            below wait for review (a memory that states none is not held by these).
        blocked_words: memories containing one wait (case-insensitive; whole words for
            Latin script, substrings for Chinese).
        require_positive_feedback: only runs rated positively (``KnowledgeEvent.feedback
            > 0``) become active at once.
        sources: :class:`SourceRule` s, first match wins, before the checks.
        checks: custom checks ``f(candidate) -> reason or None``.
        default: the decision when nothing objects.
    """

    min_chars: int = 20
    min_chars_roles: frozenset[str] = frozenset({"turn", "tool", "pattern"})
    min_confidence: float | None = None
    min_importance: float | None = None
    blocked_words: Sequence[str] = ()
    require_positive_feedback: bool = False
    sources: Sequence[SourceRule] = ()
    checks: Sequence[Callable[[Candidate], str | None]] = ()
    default: Admission = Admission.ACTIVE
    _blocked: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_fields(self, _ADMISSION_RULES)
        object.__setattr__(self, "min_chars_roles", frozenset(self.min_chars_roles))
        words = [w.strip() for w in self.blocked_words if w.strip()]
        if words:
            parts = [rf"(?<![A-Za-z0-9]){re.escape(w)}(?![A-Za-z0-9])" if w.isascii() else re.escape(w) for w in words]
            object.__setattr__(self, "_blocked", re.compile("|".join(parts), re.I))


_MINIMUM = Number(0, 1, optional=True)
_NAME = Instance(str, "a name", optional=True)
_SOURCE_RULES: dict[str, Rule] = {
    "decision": Choice(Admission), "agent_id": _NAME, "tool": _NAME, "role": _NAME,
    "min_confidence": _MINIMUM, "min_importance": _MINIMUM,
}
_ADMISSION_RULES: dict[str, Rule] = {
    "min_chars": Number(0, integer=True), "min_chars_roles": Items(TEXT), "min_confidence": _MINIMUM,
    "min_importance": _MINIMUM, "blocked_words": Items(Instance(str, "a word")), "require_positive_feedback": FLAG,
    "sources": Items(Instance(SourceRule, "a SourceRule")), "checks": Items(Is(callable, "a function f(candidate) -> reason or None")), "default": Choice(Admission),
}


def text_width(text: str) -> int:
    """The text's length in display columns (East Asian wide and fullwidth characters are two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def admit(rules: AdmissionRules, c: Candidate) -> tuple[ChunkStatus, list[str]]:
    """The status for a new memory and the reasons it must wait (empty when active)."""
    reasons: list[str] = []
    for rule in rules.sources:
        if rule.matches(c) and rule.thresholds:
            reasons += _below(c, rule.min_confidence, rule.min_importance, strict=True,
                              why=f" (source rule: {_describe(rule)})")
            continue
        if rule.matches(c):
            if rule.decision is Admission.ACTIVE and not reasons:
                return ChunkStatus.ACTIVE, []
            if rule.decision is Admission.PENDING:
                return ChunkStatus.PENDING, [*reasons, f"source rule: {_describe(rule)}"]
            break
    size = text_width(c.text.strip())
    if c.role in rules.min_chars_roles and size < rules.min_chars and not c.states_fact:
        reasons.append(f"too short ({size} < {rules.min_chars} characters, a CJK character counting as two)")
    if rules._blocked is not None:
        hit = rules._blocked.search(c.text)
        if hit is not None:
            reasons.append(f"blocked word {hit.group(0)!r}")
    if rules.require_positive_feedback and not (c.feedback is not None and c.feedback > 0):
        reasons.append("no positive feedback")
    reasons += _below(c, rules.min_confidence, rules.min_importance, strict=False)
    for check in rules.checks:
        reason = check(c)
        if reason:
            reasons.append(str(reason))
    if reasons or rules.default is Admission.PENDING:
        return ChunkStatus.PENDING, reasons or ["review required by default"]
    return ChunkStatus.ACTIVE, []


def _below(c: Candidate, min_confidence: float | None, min_importance: float | None, *, strict: bool,
           why: str = "") -> list[str]:
    """Reasons for values under the minimums; ``strict``: an unstated value is under them."""
    out = []
    for name, least, value in (("confidence", min_confidence, c.confidence),
                               ("importance", min_importance, c.importance)):
        if least is None or (value is None and not strict):
            continue
        if value is None or value < least:
            shown = "not stated" if value is None else f"{value:g}"
            out.append(f"{name} {shown} < {least:g}{why}")
    return out


def _describe(rule: SourceRule) -> str:
    parts = [f"{k}={getattr(rule, k)!r}" for k in ("agent_id", "tool", "role") if getattr(rule, k) is not None]
    return ", ".join(parts) or "any source"
