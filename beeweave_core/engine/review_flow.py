"""One review flow: every memory that waits for a person's decision, and the decision.

Two parts hold memories for review, for different reasons: ingestion stores what its admission
rules did not trust as ``pending`` (``ingest/admission.py``), and the lifecycle flags active
memories that went ``stale`` (repeated negative feedback), ``expired`` while still valued, need a
``verify`` after their source changed, or hold a ``fact_conflict`` (``lifecycle/review.py``). A reviewer should not need to know which part put a memory there, so
:meth:`Review.items` lists both, oldest first, as :class:`ReviewItem` s whose ``reasons`` say why
(``"pending"`` or one of the lifecycle's), and :meth:`Review.decide` takes one
:class:`ReviewDecision` for any of them:

- ``keep``: a pending memory becomes active (approved); a flagged one loses its stale mark and
  a passed expiry.
- ``delete``: a pending memory is rejected (deleted, its id remembered with ``reason`` so that
  re-ingesting the event does not bring it back); a flagged one is deleted.
- ``archive``: a flagged memory is archived. A pending memory never was knowledge: it is kept
  or deleted, and ``archive`` is refused for it.

The parts keep their own operations (``Ingestion.approve``/``reject``,
``Lifecycle.resolve_review``); this class only routes each memory to the one that owns it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import InvalidInputError, NotFoundError
from ..ingest.api import Ingestion
from ..lifecycle.config import ReviewDecision
from ..lifecycle.lifecycle import Lifecycle
from ..lifecycle.reports import ReviewItem
from ..records import ChunkStatus
from ..validation import check_limit, id_list

__all__ = ["Review", "PENDING", "REASONS"]

PENDING = "pending"  # the reason of a memory ingestion holds for review
# Why the lifecycle flags a memory: repeated "down" feedback, expired but valued, its source file
# changed (validity.py), a fact it states was contradicted (timeline.py).
REASONS = (PENDING, "stale", "expired", "verify", "fact_conflict")


def _reasons(value: str | Sequence[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    names = (value,) if isinstance(value, str) else tuple(value)
    bad = [n for n in names if n not in REASONS]
    if bad or not names:
        raise InvalidInputError(f"review reasons are {', '.join(REASONS)}; got {value!r}")
    return frozenset(names)


def _decision(value: Any) -> ReviewDecision:
    try:
        return ReviewDecision(value)
    except ValueError:
        raise InvalidInputError(f"decision must be {', '.join(d.value for d in ReviewDecision)}; "
                                f"got {value!r}") from None


class Review:
    """The review flow over the two parts that hold memories for review (see the module docstring)."""

    def __init__(self, ingestion: Ingestion, lifecycle: Lifecycle) -> None:
        self.ingestion = ingestion
        self.lifecycle = lifecycle

    def items(self, *, user_id: str | None = None, agent_id: str | None = None, limit: int | None = None,
              reasons: str | Sequence[str] | None = None) -> list[ReviewItem]:
        """The memories waiting for a decision, oldest first (a pending memory by when it was
        said, a flagged one by when it was flagged), each with its memory; ``reasons`` keeps
        only those waiting for one of these reasons."""
        limit = check_limit(limit)
        wanted = _reasons(reasons)
        out: list[ReviewItem] = []
        if wanted is None or PENDING in wanted:
            out += [ReviewItem(c.id, c.user_id, (PENDING,), c.timestamp, c)
                    for c in self.ingestion.pending(user_id=user_id, agent_id=agent_id, limit=limit)]
        if wanted is None or wanted - {PENDING}:
            flagged = [i for i in self.lifecycle.review_queue(user_id=user_id)
                       if wanted is None or wanted & set(i.reasons)]
            found = self.lifecycle.ctx.backend.get([i.chunk_id for i in flagged])
            out += [ReviewItem(i.chunk_id, i.user_id, i.reasons, i.flagged_at, found[i.chunk_id]) for i in flagged
                    if i.chunk_id in found and (agent_id is None or found[i.chunk_id].agent_id == agent_id)]
        out.sort(key=lambda i: (i.flagged_at, i.chunk_id))
        return out if limit is None else out[:limit]

    def decide(self, ids: str | Iterable[str], decision: ReviewDecision | str, *,
               reason: str | None = None) -> list[str]:
        """Apply ``decision`` to each memory; return the ids decided, in order.

        Every id is checked before anything changes: an unknown id is a ``NotFoundError``, and
        ``archive`` for a pending memory an ``InvalidInputError``. ``reason`` is kept with a
        rejection (``delete`` of a pending memory)."""
        choice = _decision(decision)
        wanted = id_list(ids)
        if reason is not None and not isinstance(reason, str):
            raise InvalidInputError(f"reason must be text, got {reason!r}")
        found = self.lifecycle.ctx.backend.get(wanted)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise NotFoundError(f"no memory with id {missing[0]!r}; nothing was changed")
        pending = [i for i in dict.fromkeys(wanted) if found[i].status is ChunkStatus.PENDING]
        if pending and choice is ReviewDecision.ARCHIVE:
            raise InvalidInputError(f"{pending[0]!r} is pending: keep (approve) or delete (reject) it; "
                                    "nothing was changed")
        done: set[str] = set()
        if pending:
            done.update(self.ingestion.approve(pending) if choice is ReviewDecision.KEEP
                        else self.ingestion.reject(pending, reason=reason))
        for chunk_id in dict.fromkeys(wanted):
            if chunk_id not in pending:
                self.lifecycle.resolve_review(chunk_id, choice)
                done.add(chunk_id)
        return [i for i in dict.fromkeys(wanted) if i in done]
