"""A session's working memory over HTTP: append a turn to its stored buffer, read its
rolling summary and latest turns (``BeeWeave.add_turn`` / ``get_conversation_context``)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import Field

from .deps import ERRORS, NOT_FOUND, Ctx, ctx
from .errors import segment
from .observe import note
from .schemas import _In, _Out

__all__ = ["sessions_router", "TurnIn", "ConversationOut"]


class TurnIn(_In):
    user_id: str = Field(min_length=1, max_length=512)
    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(min_length=1, max_length=1_000_000)


class TurnOut(_Out):
    role: str
    content: str
    timestamp: str


class ConversationOut(_Out):
    session_id: str
    user_id: str
    summary: str
    turns: list[TurnOut]
    total_turns: int
    summarized_turns: int
    summarizer: str


def sessions_router() -> APIRouter:
    r = APIRouter(prefix="/api/v1", responses=ERRORS)

    @r.post("/sessions/{session_id}/turns", response_model=ConversationOut, tags=["sessions"],
            summary="Append a turn to a session's working memory; returns its context after the turn")
    def add_turn(session_id: str, req: TurnIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        c.access.may_write(req.user_id)
        out = c.svc.memory.add_turn(segment(session_id), req.role, req.content, user_id=req.user_id)
        return out.to_dict()

    @r.get("/sessions/{session_id}/context", response_model=ConversationOut, tags=["sessions"], responses=NOT_FOUND,
           summary="A session's rolling summary and its latest turns")
    def context(session_id: str, user_id: str = Query(min_length=1, max_length=512),
                window: int = Query(10, ge=0, le=10_000), c: Ctx = Depends(ctx)) -> dict[str, Any]:
        user = c.access.user(user_id)
        assert user is not None  # a user was asked for: user() returns it or raises
        out = c.svc.memory.get_conversation_context(segment(session_id), window, user_id=user)
        note(c.request, results=len(out.turns))
        return out.to_dict()

    return r
