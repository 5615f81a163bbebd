"""Checking a knowledge event on the caller's thread, before it is queued.

Everything here is cheap (no regular expressions over the text, no model): ``ingest``
must return within a couple of milliseconds. A bad event raises
:class:`InvalidEventError` (or :class:`EmptyContentError`) and nothing is written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..errors import EmptyContentError, InvalidInputError
from ..records import to_datetime
from ..validation import MAX_TAGS, MAX_WEIGHT, check_number, check_user
from .errors import InvalidEventError
from .knowledge_events import KnowledgeEvent, ToolCall

__all__ = ["event_dict", "event_json", "looks_like_event", "EVENT_KEYS", "MEMORY_KEYS", "ALIASES"]

# What the caller may say about the memories an event becomes (see KnowledgeEvent).
MEMORY_KEYS = ("tags", "expires_at", "pinned", "confidence", "importance", "category")
EVENT_KEYS = ("id", "user_id", "query", "response", "session_id", "agent_id", "intermediate_steps", "metadata",
              "timestamp", "feedback", *MEMORY_KEYS)
# Other spellings accepted on the way in: the design document's client sends ``agent_response``,
# and ``ttl`` (seconds) is another way to give ``expires_at``.
ALIASES = ("agent_response", "ttl")
# What an event says: at least one of these (the others describe it).
_CONTENT_KEYS = frozenset({"query", "response", "agent_response", "intermediate_steps"})


def looks_like_event(record: Any) -> bool:
    """Whether a JSON record is a knowledge event rather than, say, a document's record: only
    event keys (the aliases included, so the design's own ``agent_response``/``ttl`` shape is
    one) and something said. ``beeweave ingest`` sorts JSONL files by it; ``event_dict`` then
    checks the values."""
    return (isinstance(record, Mapping) and set(record) <= {*EVENT_KEYS, *ALIASES}
            and bool(_CONTENT_KEYS & set(record)))


def _string(name: str, value: Any, *, optional: bool = False, empty_ok: bool = False) -> str | None:
    if value is None and (optional or empty_ok):
        return None if optional else ""
    if not isinstance(value, str):
        raise InvalidEventError(f"{name} must be a string, got {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise InvalidEventError(f"{name} must not be empty")
    return value


def _langchain_step(i: int, s: Any) -> dict[str, Any]:
    """LangChain's ``(AgentAction, observation)`` pair, as JSON: ``[action, observation]`` where the
    action is ``{"tool", "tool_input", "log"...}`` (an AgentAction's dict) or the tool's name."""
    if len(s) != 2:
        raise InvalidEventError(f"intermediate_steps[{i}] as a list must be [action, observation], "
                                f"got {len(s)} items")
    action, observation = s
    if hasattr(action, "tool"):  # an AgentAction object itself (Python callers)
        action = {"tool": action.tool, "tool_input": getattr(action, "tool_input", None)}
    if isinstance(action, str):
        action = {"tool": action}
    if not isinstance(action, Mapping):
        raise InvalidEventError(f"intermediate_steps[{i}][0] must be an action object or a tool name, "
                                f"got {type(action).__name__}")
    tool = action.get("tool")
    given = action.get("tool_input", action.get("input"))
    return {"tool": tool, "input": given, "output": observation}


def _step(i: int, s: Any) -> dict[str, Any]:
    if isinstance(s, ToolCall):
        s = s.to_dict()
    elif isinstance(s, (list, tuple)):
        s = _langchain_step(i, s)
    if not isinstance(s, Mapping):
        raise InvalidEventError(f"intermediate_steps[{i}] must be a ToolCall or a dict, got {type(s).__name__}")
    unknown = set(s) - {"tool", "input", "output", "error"}
    if unknown:
        raise InvalidEventError(f"intermediate_steps[{i}] has unknown keys {sorted(unknown)}")
    tool = _string(f"intermediate_steps[{i}].tool", s.get("tool"))
    error = s.get("error")
    return {"tool": tool, "input": s.get("input"), "output": s.get("output"),
            "error": None if error is None else str(error)}


def event_dict(event: KnowledgeEvent | Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """Validate an event and return it as a new dict (the caller's object is not changed).

    A missing id is generated and a missing timestamp is ``now``; metadata must be JSON.
    """
    if isinstance(event, KnowledgeEvent):
        data: dict[str, Any] = {k: getattr(event, k) for k in EVENT_KEYS}
    elif isinstance(event, Mapping):
        unknown = set(event) - set(EVENT_KEYS) - set(ALIASES)
        if unknown:
            raise InvalidEventError(f"unknown event keys {sorted(unknown)}; known: {', '.join(EVENT_KEYS + ALIASES)}")
        data = dict(event)
        if "agent_response" in data:
            if data.get("response") not in (None, "") and data["agent_response"] not in (None, data["response"]):
                raise InvalidEventError("response and agent_response are two names of one field: give one")
            alias = data.pop("agent_response")
            if data.get("response") in (None, ""):
                data["response"] = alias
    else:
        raise InvalidEventError(f"ingest takes a KnowledgeEvent or a dict, got {type(event).__name__}")
    event_id = data.get("id")
    if event_id is None:
        from ..records import new_id

        event_id = new_id()
    _string("id", event_id)
    if len(event_id) > 256:
        raise InvalidEventError("an event id may have at most 256 characters")
    user_id = _string("user_id", data.get("user_id"))
    try:
        check_user(user_id)
    except InvalidInputError as exc:
        raise InvalidEventError(str(exc)) from None
    query = _string("query", data.get("query"), empty_ok=True)
    response = _string("response", data.get("response"), empty_ok=True)
    steps_in = data.get("intermediate_steps") or []
    if isinstance(steps_in, (str, bytes, Mapping)) or not hasattr(steps_in, "__iter__"):
        raise InvalidEventError("intermediate_steps must be a list of ToolCalls or dicts")
    steps = [_step(i, s) for i, s in enumerate(steps_in)]
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise InvalidEventError(f"metadata must be a dict, got {type(metadata).__name__}")
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidEventError(f"metadata must be JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidEventError("metadata is nested too deeply") from None
    feedback = data.get("feedback")
    if feedback is not None and (isinstance(feedback, bool) or not isinstance(feedback, (int, float))
                                 or not math.isfinite(feedback)):
        raise InvalidEventError("feedback must be a finite number (> 0 positive, < 0 negative) or None")
    try:
        ts = to_datetime(data["timestamp"]) if data.get("timestamp") is not None else to_datetime(now)
    except InvalidInputError as exc:
        raise InvalidEventError(str(exc)) from None
    except OverflowError:  # a date at the calendar's edge whose UTC time is past it
        raise InvalidEventError(f"timestamp {data.get('timestamp')!r} is out of range") from None
    has_output = any(s["output"] not in (None, "") for s in steps)
    if not (query.strip() or response.strip() or has_output):  # type: ignore[union-attr]
        raise EmptyContentError("the event has no query, no response and no tool output: nothing to remember")
    out = {"id": event_id, "user_id": user_id, "query": query, "response": response,
           "session_id": _string("session_id", data.get("session_id"), optional=True),
           "agent_id": _string("agent_id", data.get("agent_id"), optional=True),
           "intermediate_steps": steps, "metadata": dict(metadata), "timestamp": ts.isoformat(),
           "feedback": None if feedback is None else float(feedback)}
    out.update(_memory_fields(data, metadata, ts))
    return out


def _memory_fields(data: Mapping[str, Any], metadata: Mapping[str, Any], ts: datetime) -> dict[str, Any]:
    """The caller's tags, expiry, pin, confidence, importance and category, checked.

    Each may be given at the top level or (as the design document's client does with
    ``metadata.tags``) inside ``metadata``; the top level wins. Only what was given is kept,
    so events queued before these fields existed read the same.
    """
    def given(key: str) -> Any:
        value = data.get(key)
        return metadata.get(key) if value is None else value

    out: dict[str, Any] = {}
    tags = given("tags")
    if tags is not None:
        if isinstance(tags, str):
            tags = [tags]
        if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) and t.strip() for t in tags):
            raise InvalidEventError("tags must be a list of non-empty strings")
        if len(tags) > MAX_TAGS:
            raise InvalidEventError(f"an event may carry at most {MAX_TAGS} tags, got {len(tags)}")
        if tags:
            out["tags"] = list(dict.fromkeys(t.strip() for t in tags))
    ttl, expires = given("ttl"), given("expires_at")
    if ttl is not None and expires is not None:
        raise InvalidEventError("give expires_at or ttl, not both")
    if ttl is not None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
            raise InvalidEventError("ttl must be a positive number of seconds")
        try:
            out["expires_at"] = (ts + timedelta(seconds=float(ttl))).isoformat()
        except OverflowError:
            raise InvalidEventError(f"ttl {ttl!r} puts the expiry past the calendar's end") from None
    elif expires is not None:
        try:
            out["expires_at"] = to_datetime(expires, "expires_at").isoformat()
        except InvalidInputError as exc:
            raise InvalidEventError(str(exc)) from None
        except OverflowError:
            raise InvalidEventError(f"expires_at {expires!r} is out of range") from None
    pinned = given("pinned")
    if pinned is not None:
        if not isinstance(pinned, bool):
            raise InvalidEventError("pinned must be true or false")
        out["pinned"] = pinned
    # The bounds of the memory fields they become (validation.check_chunk): importance is the
    # starting weight, and positive, or the memory would never rank.
    for key, high in (("confidence", 1.0), ("importance", MAX_WEIGHT)):
        value = given(key)
        if value is None:
            continue
        try:
            out[key] = check_number(key, value, low=0.0, high=high)
        except InvalidInputError as exc:
            raise InvalidEventError(str(exc)) from None
        if key == "importance" and value <= 0:
            raise InvalidEventError(f"importance must be a positive number, got {value!r}")
    category = given("category")
    if category is not None:
        out["category"] = _string("category", category)
    return out


def event_json(body: dict[str, Any], *, max_chars: int) -> str:
    """The queue's text of a validated event. Tool inputs and outputs that are not JSON
    are kept as their ``str()``."""
    try:
        text = json.dumps(body, ensure_ascii=False, default=str)
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidEventError(f"the event holds text that is not valid Unicode (lone surrogate at {exc.start})") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidEventError(f"the event cannot be serialised: {exc}") from None
    if len(text) > max_chars:
        raise InvalidEventError(f"the event has {len(text)} characters; the limit is {max_chars} "
                                "(IngestConfig.max_event_chars)")
    return text
