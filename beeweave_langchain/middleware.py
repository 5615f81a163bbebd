"""``BeeWeaveMiddleware``: long-term memory for ``langchain.agents.create_agent`` agents.

Before the agent runs, the memories relevant to the user's message are looked up once;
each model call of the run gets them in its system message (they are not added to the
conversation). After the run, the run becomes one knowledge event for
``BeeWeave.ingest`` (what becomes a memory is the ingestion pipeline's decision), and
the recalled memories the answer actually drew on get a ``used`` feedback. Optional
tools let the model search, save, update and forget memories itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.channels.untracked_value import UntrackedValue
from typing_extensions import NotRequired

from beeweave_core.defaults import DEFAULT_TOP_K
from beeweave_core.degrade import Failures
from beeweave_core.errors import BeeWeaveError, InvalidInputError, NotFoundError
from beeweave_core.ingest.knowledge_events import KnowledgeEvent, ToolCall
from beeweave_core.ingest.memory_tools import METADATA_KEY, tool_names
from beeweave_core.lifecycle.attribution import AttributionConfig, drawn_on, reaction_signal, tool_failed, tool_text

from ._convert import _content_text, jsonable
from .store import item_of

__all__ = ["BeeWeaveMiddleware", "BeeWeaveState", "DEFAULT_HEADER"]

logger = logging.getLogger(__name__)

DEFAULT_HEADER = "Relevant memories from earlier conversations (use them when they help; they may be outdated):"


class BeeWeaveState(AgentState[Any]):
    """The agent state with the run's recalled memories (private, not checkpointed)."""

    beeweave_recalled: NotRequired[Annotated[list[dict[str, Any]], UntrackedValue, PrivateStateAttr]]


def _label(context: Any, name: str) -> str | None:
    value = context.get(name) if isinstance(context, Mapping) else getattr(context, name, None)
    return value if isinstance(value, str) and value else None


def _config_user() -> str | None:
    """The user id in the running graph's config: ``configurable`` (``user_id``, LangMem's
    ``langgraph_user_id``) or ``metadata``; None outside a run."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except Exception:  # not inside a runnable context
        return None
    for part in (config.get("configurable"), config.get("metadata")):
        for key in ("user_id", "langgraph_user_id"):
            if user := _label(part, key):
                return user
    return None


def _run_messages(messages: Sequence[Any]) -> list[Any]:
    """The messages of the latest run: from the last human message on."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return list(messages[i:])
    return list(messages)


class BeeWeaveMiddleware(AgentMiddleware[BeeWeaveState, Any, Any]):
    """Recall before the model, capture after the agent, feedback for what was used.

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[langchain]"

    Instantiate:
        .. code-block:: python

            from langchain.agents import create_agent
            from beeweave_core import BeeWeave
            from beeweave_langchain import BeeWeaveMiddleware

            memory = BeeWeave("memory.db")
            agent = create_agent(model, tools, middleware=[BeeWeaveMiddleware(memory, user_id="alice")])

    Usage:
        .. code-block:: python

            agent.invoke({"messages": [{"role": "user", "content": "I'm allergic to peanuts."}]})
            memory.flush()  # ingestion runs in the background
            agent.invoke({"messages": [{"role": "user", "content": "Suggest a snack."}]})
            # the second run's model calls see "I'm allergic to peanuts." in the system message

    Scope: ``user_id`` (or ``runtime.context["user_id"]`` / ``context.user_id`` per run),
    ``agent_id``, and ``session_id`` (default: the run's LangGraph thread id). Recall and the
    ``search_memory`` tool read the user's memories and the shared knowledge of ``scopes``
    (None: the store's default, the user's, the tenant's and the scopes granted to the user).

    Relevance: with a "nothing relevant" gate (``abstain_below``; None: the store's default,
    ``SearchConfig.abstain_below``; ``DEFAULT_ABSTAIN_BELOW`` is the default model's tuned gate,
    with which most off-topic requests get nothing): when no
    memory reaches that calibrated relevance (``SearchHit.relevance``) the model gets no memory
    message at all; otherwise the top ``k`` are recalled, less relevant ones beside the relevant
    (optionally each at least ``min_relevance`` and of a fused score of at least ``min_score``),
    best first while they fit in ``max_chars``; when none is recalled there is no memory message.
    ``abstain_below=0`` turns any gate off. Each recalled memory's ``score`` (in the state's
    ``beeweave_recalled`` and the ``search_memory`` tool's answer) is its calibrated relevance.

    Feedback (the rules are ``beeweave_core.lifecycle.attribution``'s): after the run, each
    recalled memory the final answer or a tool call drew on (at least ``used_overlap`` of its
    words there, or close in meaning when the store can embed) gets ``feedback(..., "used")``;
    one a failed tool call (an error, a non-zero exit code, a failed status) drew on gets ``"down"``. The user's
    next message in the same thread rates what the previous answer used ("thanks", "解决了" →
    ``"up"``; "that's wrong", "不对" → ``"down"``; cue lists in ``attribution``).

    An unavailable store (a locked file, the database or the server unreachable) is logged and
    counted in ``errors``; it never reaches the agent, which then runs without memories. Anything
    else (bad input, a closed store, a refused key) raises, as in the other faces
    (``beeweave_core.degrade``): a set-up mistake is seen, not a run that quietly has no memories.

    Args:
        memory: the BeeWeave store (or a ``BeeWeaveClient``).
        user_id, agent_id, session_id: the scope (see above).
        k: how many memories to consider.
        min_score, min_relevance, abstain_below: the relevance gates (see above).
        max_chars: the budget of the memory message (about 4 characters a token).
        used_overlap: the share of a memory's words the answer must contain to count as used
            (replaces ``attribution.lexical``, 0.6, when given).
        attribution: an ``AttributionConfig`` (the thresholds, the cue lists).
        tools: register ``search_memory``, ``save_memory``, ``update_memory`` and
            ``forget_memory`` for the model (they need ``user_id``).
        capture: ingest each run as a knowledge event. The ingestion never stores calls of
            the memory's own tools (this middleware's, the MCP server's, LangMem's:
            ``beeweave_core.ingest.memory_tools``; and ``memory_tools``), nor a run that only
            called them: a save is not stored twice, a recall does not re-store what it found.
        memory_tools: more tool names to treat as memory tools (e.g. a custom recall tool).
        header: the first line of the memory message.

    Without a user id (``user_id=``, ``runtime.context``, the run's ``configurable`` or
    ``metadata``) a run recalls and captures nothing; the first such run logs a warning.
    """

    state_schema = BeeWeaveState

    def __init__(self, memory: Any, *, user_id: str | None = None, agent_id: str | None = None,
                 session_id: str | None = None, k: int = DEFAULT_TOP_K, min_score: float | None = None,
                 min_relevance: float | None = None, abstain_below: float | None = None,
                 max_chars: int = 2000, used_overlap: float | None = None,
                 tools: bool = False, capture: bool = True, header: str = DEFAULT_HEADER,
                 attribution: AttributionConfig | None = None,
                 memory_tools: Iterable[str] | None = None, scopes: Sequence[str] | None = None) -> None:
        super().__init__()
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise InvalidInputError("k must be a non-negative integer")
        if not isinstance(max_chars, int) or max_chars <= 0:
            raise InvalidInputError("max_chars must be a positive integer")
        if used_overlap is not None and not 0.0 <= used_overlap <= 1.0:
            raise InvalidInputError("used_overlap is a share between 0 and 1")
        if tools and not user_id:
            raise InvalidInputError("the memory tools act for one user: pass user_id= with tools=True")
        self.memory = memory
        self.user_id, self.agent_id, self.session_id = user_id, agent_id, session_id
        self.scopes = None if scopes is None else list(scopes)
        self.k, self.min_score, self.min_relevance, self.abstain_below = k, min_score, min_relevance, abstain_below
        self.max_chars, self.used_overlap, self.capture, self.header = max_chars, used_overlap, capture, header
        self.attribution = attribution or AttributionConfig()
        self.memory_tools = sorted(tool_names(memory_tools or ()))  # beside the engine's defaults
        self._warned_no_user = False
        if used_overlap is not None:
            self.attribution = replace(self.attribution, lexical=used_overlap)
        self._last_used: dict[tuple[str, str | None], list[str]] = {}  # (user, thread) -> what the last answer used
        self._failures = Failures(logger)
        self._lock = threading.Lock()
        self.tools: list[BaseTool] = _memory_tools(self) if tools else []

    @property
    def errors(self) -> int:
        """How many failures the middleware absorbed (each was logged)."""
        return self._failures.count

    # -- scope -------------------------------------------------------------------------------
    def _user(self, runtime: Any) -> str | None:
        user = self.user_id or _label(getattr(runtime, "context", None), "user_id") or _config_user()
        if user is None and not self._warned_no_user:
            self._warned_no_user = True  # once per middleware: every run after this one is the same
            logger.warning("BeeWeaveMiddleware has no user id: this run recalls and captures nothing. Pass "
                           "BeeWeaveMiddleware(memory, user_id=...), or the run's context={'user_id': ...} "
                           "(with a context_schema) or config={'configurable': {'user_id': ...}}")
        return user

    def _session(self, runtime: Any) -> str | None:
        info = getattr(runtime, "execution_info", None)
        return self.session_id or _label(getattr(runtime, "context", None), "session_id") or \
            (getattr(info, "thread_id", None) or None)

    # -- recall ------------------------------------------------------------------------------
    def _recall(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        user = self._user(runtime)
        query = next((_content_text(m.content) for m in reversed(state.get("messages", []))
                      if isinstance(m, HumanMessage) and _content_text(m.content).strip()), "")
        if user and query.strip():
            self._react(user, self._session(runtime), query)
        if not user or not query.strip() or self.k == 0:
            return {"beeweave_recalled": []}
        none: list[Any] = []
        hits = self._failures.unless_unavailable("recall", lambda: self.memory.search(
            query, user_id=user, k=self.k, min_score=self.min_score, min_relevance=self.min_relevance,
            abstain_below=self.abstain_below, scopes=self.scopes), none)
        recalled: list[dict[str, Any]] = []
        used = 0
        for h in hits:
            text = _memory_text(h.chunk)
            if not text.strip():
                continue
            room = self.max_chars - used
            if room <= 0:
                break
            if len(text) > room:
                if recalled:
                    break
                text = text[: max(room - 1, 0)] + "…"  # the best memory alone is over budget: cut it
            recalled.append({"id": h.id, "text": text, "score": _relevance(h)})
            used += len(text) + 3
        return {"beeweave_recalled": recalled}

    def before_agent(self, state: BeeWeaveState, runtime: Any) -> dict[str, Any] | None:
        return self._recall(state, runtime)

    async def abefore_agent(self, state: BeeWeaveState, runtime: Any) -> dict[str, Any] | None:
        return await asyncio.to_thread(self._recall, state, runtime)

    def _with_memories(self, request: ModelRequest) -> ModelRequest:
        state: Mapping[str, Any] = request.state or {}
        recalled: list[dict[str, Any]] = state.get("beeweave_recalled") or []
        if not recalled:
            return request
        block = "\n".join([self.header, *("- " + r["text"].replace("\n", "\n  ") for r in recalled)])
        current = request.system_message
        if current is None:
            return request.override(system_message=SystemMessage(content=block))
        content = current.content
        if isinstance(content, str):
            new: Any = f"{content}\n\n{block}" if content else block
        else:
            new = [*list(content), {"type": "text", "text": "\n\n" + block}]
        return request.override(system_message=SystemMessage(content=new))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        return handler(self._with_memories(request))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        return await handler(self._with_memories(request))

    # -- capture and feedback ------------------------------------------------------------------
    def _capture(self, state: Mapping[str, Any], runtime: Any) -> None:
        self._failures.unless_unavailable("capture", lambda: self._capture_run(state, runtime), None)

    def _capture_run(self, state: Mapping[str, Any], runtime: Any) -> None:
        user = self._user(runtime)
        messages = _run_messages(state.get("messages", []))
        if not user or not messages:
            return
        query = _content_text(messages[0].content) if isinstance(messages[0], HumanMessage) else ""
        answer = next((_content_text(m.content) for m in reversed(messages)
                       if isinstance(m, AIMessage) and _content_text(m.content).strip()), "")
        results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
        calls = [call for m in messages if isinstance(m, AIMessage) for call in m.tool_calls]
        steps = [ToolCall(str(call["name"]), jsonable(call.get("args")),
                          _content_text(results[cid].content) if (cid := call.get("id")) in results else None)
                 for call in calls]
        # A ToolMessage with status "error" is a tool that raised (LangChain caught it for the model).
        errored = [getattr(results.get(call.get("id") or ""), "status", None) == "error" for call in calls]
        recalled = state.get("beeweave_recalled") or []
        texts = {r["id"]: r["text"] for r in recalled}
        embed = getattr(self.memory, "embed_query", None)
        used = drawn_on(texts, answer, [tool_text(s.tool, s.input) for s in steps], embed=embed,
                        config=self.attribution) if texts else []
        failed = [tool_text(s.tool, s.input) for s, err in zip(steps, errored) if err or tool_failed(s.output, s.error)]
        misled = drawn_on(texts, "", failed, config=self.attribution) if texts and failed else []
        if self.capture and (query or answer or steps):
            info = getattr(runtime, "execution_info", None)
            metadata: dict[str, Any] = {"source": "langchain.middleware"}
            if (run_id := getattr(info, "run_id", None)) is not None:
                metadata["run_id"] = str(run_id)
            if recalled:
                metadata["used_memories"] = [r["id"] for r in recalled]
            if self.memory_tools:  # the engine never stores their calls (nor a run that only called them)
                metadata[METADATA_KEY] = list(self.memory_tools)
            self.memory.ingest(KnowledgeEvent(user_id=user, query=query, response=answer,
                                              session_id=self._session(runtime), agent_id=self.agent_id,
                                              intermediate_steps=steps, metadata=metadata))
        if used:
            self._rate(used, "used")
        if misled:
            self._rate(misled, "down")
        with self._lock:
            self._last_used[(user, self._session(runtime))] = used

    def _react(self, user: str, session: str | None, message: str) -> None:
        """The user's new message rates what the previous answer in this thread used."""
        with self._lock:
            used = self._last_used.pop((user, session), None)
        signal = reaction_signal(message, self.attribution) if used else None
        if used and signal is not None:
            self._failures.unless_unavailable("implicit feedback", lambda: self._rate(used, signal.value), None)

    def _rate(self, ids: list[str], signal: str) -> None:
        try:
            self.memory.feedback(ids, signal)
        except NotFoundError:  # one was merged or deleted meanwhile: rate the others one by one
            for i in ids:
                try:
                    self.memory.feedback([i], signal)
                except NotFoundError:
                    logger.warning("BeeWeave: memory %s was gone before the %r feedback", i, signal)

    def after_agent(self, state: BeeWeaveState, runtime: Any) -> dict[str, Any] | None:
        self._capture(state, runtime)
        return None

    async def aafter_agent(self, state: BeeWeaveState, runtime: Any) -> dict[str, Any] | None:
        await asyncio.to_thread(self._capture, state, runtime)
        return None


def _memory_text(chunk: Any) -> str:
    """What the model reads of a memory: a LangGraph store item (``BeeWeaveStore``) as its value's
    ``text`` or ``content`` field, else the value as JSON; any other memory as its raw content."""
    item = item_of(chunk)
    value = item.get("value") if item is not None else None
    if isinstance(value, Mapping):
        for field in ("text", "content"):
            if isinstance(value.get(field), str) and value[field].strip():
                return str(value[field])
        return json.dumps(value, ensure_ascii=False)
    return str(chunk.raw_content or chunk.content)


def _relevance(hit: Any, digits: int | None = None) -> float | None:
    """The score a face shows for a hit: its calibrated relevance (None when the search read none)."""
    if hit.relevance is None:
        return None
    return float(hit.relevance) if digits is None else round(float(hit.relevance), digits)


# -- the memory tools -----------------------------------------------------------------------
_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "search_memory": ("Search the user's long-term memory. Returns the matching memories with their ids.", {
        "type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5, "description": "How many."}},
        "required": ["query"]}),
    "save_memory": ("Save a fact worth remembering about the user for later conversations.", {
        "type": "object", "properties": {
            "content": {"type": "string", "description": "The fact, as a self-contained sentence."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Optional labels."}},
        "required": ["content"]}),
    "update_memory": ("Replace the text of a memory (by its id) that is no longer accurate.", {
        "type": "object", "properties": {
            "memory_id": {"type": "string", "description": "The id returned by search_memory."},
            "content": {"type": "string", "description": "The corrected fact."}},
        "required": ["memory_id", "content"]}),
    "forget_memory": ("Delete a memory (by its id) the user wants forgotten or that is wrong.", {
        "type": "object", "properties": {
            "memory_id": {"type": "string", "description": "The id returned by search_memory."}},
        "required": ["memory_id"]}),
}


def _memory_tools(mw: BeeWeaveMiddleware) -> list[BaseTool]:
    memory, user = mw.memory, mw.user_id

    def own(memory_id: str) -> None:
        try:
            chunk = memory.get(memory_id)
        except NotFoundError:
            chunk = None
        if chunk is None or chunk.user_id != user:  # another user's memory is as absent as a missing one
            raise ToolException(f"no memory with id {memory_id!r}")

    def search_memory(query: str, k: int = DEFAULT_TOP_K) -> str:
        hits = memory.search(query, user_id=user, k=k, min_relevance=mw.min_relevance, abstain_below=mw.abstain_below,
                             scopes=mw.scopes)
        return json.dumps([{"id": h.id, "content": _memory_text(h.chunk), "score": _relevance(h, 4)}
                           for h in hits], ensure_ascii=False)

    def save_memory(content: str, tags: list[str] | None = None) -> str:
        return json.dumps({"id": memory.add(content, user_id=user, agent_id=mw.agent_id, tags=tags or ())})

    def update_memory(memory_id: str, content: str) -> str:
        own(memory_id)
        memory.update(memory_id, content=content)
        return json.dumps({"id": memory_id, "updated": True})

    def forget_memory(memory_id: str) -> str:
        own(memory_id)
        return json.dumps({"id": memory_id, "deleted": bool(memory.delete(memory_id))})

    def guarded(fn: Callable[..., str]) -> Callable[..., str]:
        def run(**kwargs: Any) -> str:
            try:
                return fn(**kwargs)
            except BeeWeaveError as exc:  # bad input or an unavailable store: the model reads why
                raise ToolException(str(exc)) from exc
        return run

    tools: list[BaseTool] = []
    for fn in (search_memory, save_memory, update_memory, forget_memory):
        description, schema = _SCHEMAS[fn.__name__]
        sync = guarded(fn)

        async def coro(_sync: Callable[..., str] = sync, **kwargs: Any) -> str:
            return await asyncio.to_thread(_sync, **kwargs)

        tools.append(StructuredTool.from_function(func=sync, coroutine=coro, name=fn.__name__,
                                                  description=description, args_schema=schema,
                                                  infer_schema=False, handle_tool_error=True))
    return tools
