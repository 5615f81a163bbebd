"""``BeeWeaveCallbackHandler``: agent runs become knowledge events.

The handler follows each top-level run (a run with no parent) and the runs nested
under it, collects the user's input, every tool call with its input and result,
the memories a ``BeeWeaveRetriever`` returned and the final answer, and hands one
``KnowledgeEvent`` to ``BeeWeave.ingest`` when the run ends. What becomes a memory
is decided by the ingestion pipeline in ``beeweave_core``, not here.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from beeweave_core.api import MemoryAPI
from beeweave_core.degrade import Failures
from beeweave_core.errors import InvalidInputError, NotFoundError
from beeweave_core.ingest.knowledge_events import KnowledgeEvent, ToolCall
from beeweave_core.ingest.memory_tools import METADATA_KEY, tool_names
from beeweave_core.lifecycle.attribution import drawn_on, reaction_signal, tool_failed, tool_text

from ._convert import INPUT_KEYS, OUTPUT_KEYS, jsonable, text_of, tool_calls_from_steps
from .retriever import RETRIEVER_NAME

if TYPE_CHECKING:
    from langchain_core.agents import AgentAction
    from langchain_core.documents import Document

__all__ = ["BeeWeaveCallbackHandler"]

logger = logging.getLogger(__name__)

_F = TypeVar("_F", bound=Callable[..., None])


def _guarded(method: _F) -> _F:
    """Run a callback body so that no failure ever reaches the agent: log it and count it."""

    @functools.wraps(method)
    def wrapper(self: BeeWeaveCallbackHandler, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception:
            self._failed(method.__name__)

    return wrapper  # type: ignore[return-value]


@dataclass
class _Run:
    """What has been seen so far of one top-level run."""

    query: str
    user_id: str | None
    session_id: str | None
    agent_id: str | None
    name: str | None
    members: list[UUID] = field(default_factory=list)  # nested run ids, to forget them at the end
    tools: dict[UUID, ToolCall] = field(default_factory=dict)  # by tool run id, in start order
    actions: list[ToolCall] = field(default_factory=list)  # from on_agent_action (see on_chain_end)
    retrievals: set[UUID] = field(default_factory=set)  # BeeWeaveRetriever runs
    used: list[str] = field(default_factory=list)  # memory ids those retrievals returned
    texts: dict[str, str] = field(default_factory=dict)  # their texts, to tell which the answer drew on
    recalls: set[UUID] = field(default_factory=set)  # tool runs that ran a BeeWeaveRetriever (memory tools)


def _str_or_none(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


class BeeWeaveCallbackHandler(BaseCallbackHandler):
    """Lets an agent learn from its runs: each top-level run is ingested as one knowledge event.

    It works on any runnable, ``AgentExecutor`` and ``langchain.agents.create_agent``
    agents, with ``invoke`` and ``ainvoke``. The callbacks only copy values; the event
    is handed to ``BeeWeave.ingest``, which returns at once and does the work in the
    background. A failure (a closed store, a bad value) is logged and counted in
    ``errors``; it never reaches the agent.

    ``user_id``, ``session_id`` and ``agent_id`` come from the run's config metadata when
    it has them, else from the handler's arguments.

    Feedback (rules in ``beeweave_core.lifecycle.attribution``): of the memories a
    ``BeeWeaveRetriever`` gave the run, those the final answer or a tool call drew on get
    ``"used"``, those a failed tool call (an error, a non-zero exit code, a failed status) drew on ``"down"``;
    the next run of the same user and session rates them from its message ("thanks",
    "解决了" → ``"up"``; "that's wrong", "不对" → ``"down"``).

    Note: LangChain passes constructor callbacks (``AgentExecutor(callbacks=[handler])``)
    to the executor only, not to its tools. The handler then reads tool calls from the
    agent's actions, and their results from the run's ``intermediate_steps`` when the
    executor has ``return_intermediate_steps=True``. Callbacks given per call
    (``config={"callbacks": [handler]}``) reach every nested run.

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[langchain]"

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_langchain import BeeWeaveCallbackHandler

            memory = BeeWeave("memory.db")
            handler = BeeWeaveCallbackHandler(memory, user_id="alice", session_id="s1")

    Usage:
        .. code-block:: python

            agent.invoke({"messages": [{"role": "user", "content": "..."}]},
                         config={"callbacks": [handler], "metadata": {"session_id": "s2"}})
            handler.feedback(handler.last_run_id, "up")  # the user liked the answer

    Args:
        memory: a ``MemoryAPI``: the BeeWeave store, or a ``BeeWeaveClient`` for a server.
        user_id: the default user (required by the store, here or in the run's metadata).
        session_id: the default session.
        agent_id: the default agent.
        keep_runs: how many finished runs ``feedback`` can still rate.
        memory_tools: more tool names to treat as memory tools. The ingestion never stores
            calls of the memory's own tools, nor a run that only called them (a save is not
            stored twice, a recall does not re-store what it found): the default names
            (``beeweave_core.ingest.memory_tools.MEMORY_TOOLS``: the middleware's, the MCP
            server's, LangMem's), these, and any tool that ran a ``BeeWeaveRetriever``.
    """

    # The callbacks are cheap and never block (ingest is non-blocking), so they run
    # inline: under ``ainvoke`` LangChain would otherwise send each one to a thread.
    run_inline: bool = True

    def __init__(self, memory: MemoryAPI, *, user_id: str | None = None, session_id: str | None = None,
                 agent_id: str | None = None, keep_runs: int = 1000,
                 memory_tools: Iterable[str] | None = None) -> None:
        self.memory = memory
        self.memory_tools = sorted(tool_names(memory_tools or ()))  # beside the engine's defaults
        self.user_id = user_id
        self.session_id = session_id
        self.agent_id = agent_id
        self.keep_runs = keep_runs
        self._failures = Failures(logger)
        self.last_run_id: UUID | None = None
        self._runs: dict[UUID, _Run] = {}  # top-level runs in progress
        self._root_of: dict[UUID, UUID] = {}  # any run in progress -> its top-level run
        self._finished: OrderedDict[UUID, tuple[str, ...]] = OrderedDict()  # run -> memories it used
        self._last_used: OrderedDict[tuple[str | None, str | None], tuple[str, ...]] = OrderedDict()  # per thread
        self._lock = threading.Lock()  # tools of one run may report from several threads

    # Model tokens and custom events carry nothing the event needs: skip them.
    @property
    def ignore_llm(self) -> bool:
        return True

    @property
    def ignore_chat_model(self) -> bool:
        return True

    @property
    def ignore_retry(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    @property
    def errors(self) -> int:
        """How many failures the handler absorbed (each was logged)."""
        return self._failures.count

    # -- bookkeeping ----------------------------------------------------------------
    def _failed(self, where: str) -> None:
        self._failures.record("BeeWeave callback %s failed; the run goes on without it", where,
                              level=logging.ERROR, exc_info=True)

    def _join(self, run_id: UUID, parent_run_id: UUID | None) -> _Run | None:
        """Register a nested run under its top-level run; None if the parent is not followed."""
        with self._lock:
            root = self._root_of.get(parent_run_id) if parent_run_id is not None else None
            run = self._runs.get(root) if root is not None else None
            if run is not None:
                self._root_of[run_id] = root  # type: ignore[assignment]
                run.members.append(run_id)
            return run

    def _run_of(self, run_id: UUID) -> _Run | None:
        root = self._root_of.get(run_id)
        return self._runs.get(root) if root is not None else None

    def _close(self, run_id: UUID) -> _Run | None:
        """Forget a top-level run and its nested runs; keep what it used for ``feedback``."""
        with self._lock:
            run = self._runs.pop(run_id, None)
            if run is None:
                return None
            self._root_of.pop(run_id, None)
            for member in run.members:
                self._root_of.pop(member, None)
            self._finished[run_id] = tuple(run.used)
            while len(self._finished) > self.keep_runs:
                self._finished.popitem(last=False)
            self.last_run_id = run_id
            return run

    # -- chains: the top-level run ---------------------------------------------------------
    @_guarded
    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                       **kwargs: Any) -> None:
        if parent_run_id is not None:
            self._join(run_id, parent_run_id)
            return
        md = metadata or {}
        run = _Run(query=text_of(inputs, role="human", keys=INPUT_KEYS),
                   user_id=_str_or_none(md.get("user_id")) or self.user_id,
                   session_id=_str_or_none(md.get("session_id")) or self.session_id,
                   agent_id=_str_or_none(md.get("agent_id")) or self.agent_id,
                   name=kwargs.get("name") or (serialized or {}).get("name"))
        with self._lock:
            previous = self._last_used.pop((run.user_id, run.session_id), ())
        # The user's new message rates what the previous answer in this thread drew on.
        signal = reaction_signal(run.query) if previous and run.query else None
        if signal is not None:
            self._send_feedback(previous, signal.value)
        with self._lock:
            self._runs[run_id] = run
            self._root_of[run_id] = run_id
            while len(self._runs) > self.keep_runs:  # runs that never ended (abandoned streams)
                stale = next(iter(self._runs))
                for member in self._runs.pop(stale).members:
                    self._root_of.pop(member, None)
                self._root_of.pop(stale, None)

    @_guarded
    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        if parent_run_id is not None:
            return
        run = self._close(run_id)
        if run is None:
            return
        if not run.query and kwargs.get("inputs") is not None:  # streamed runs report their input at the end
            run.query = text_of(kwargs["inputs"], role="human", keys=INPUT_KEYS)
        steps = list(run.tools.values())
        if not steps and isinstance(outputs, Mapping) and outputs.get("intermediate_steps"):
            steps = tool_calls_from_steps(outputs["intermediate_steps"])
        steps = steps or run.actions
        answer = text_of(outputs, role="ai", keys=OUTPUT_KEYS)
        if run.query or answer or steps:
            self._ingest(run_id, run, answer, steps)
        # Only what the answer or a tool call drew on was used; what a failed call drew on misled it.
        used = drawn_on(run.texts, answer, [tool_text(s.tool, s.input) for s in steps]) if run.texts else []
        failed = [tool_text(s.tool, s.input) for s in steps if tool_failed(s.output, s.error)]
        misled = drawn_on(run.texts, "", failed) if run.texts and failed else []
        with self._lock:
            self._finished[run_id] = tuple(used)
            self._last_used[(run.user_id, run.session_id)] = tuple(used)
            while len(self._last_used) > self.keep_runs:
                self._last_used.popitem(last=False)
        if used:
            self._send_feedback(used, "used")
        if misled:
            self._send_feedback(misled, "down")

    @_guarded
    def on_chain_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                       **kwargs: Any) -> None:
        # A failed run teaches nothing reliable and its memories were not "used";
        # it stays ratable through ``feedback``.
        if parent_run_id is None:
            self._close(run_id)

    def _ingest(self, run_id: UUID, run: _Run, answer: str, steps: list[ToolCall]) -> None:
        if run.user_id is None:
            raise ValueError(f"run {run_id} has no user_id: pass user_id= to BeeWeaveCallbackHandler "
                             "or metadata={'user_id': ...} in the run's config")
        metadata: dict[str, Any] = {"source": "langchain", "run_id": str(run_id)}
        if run.name:
            metadata["run_name"] = str(run.name)
        if run.used:  # the memories this run was given (provenance for the ingestion pipeline)
            metadata["used_memories"] = list(run.used)
        # The engine never stores calls of the memory's own tools (nor a run that only called them).
        own = {*self.memory_tools, *(run.tools[key].tool for key in run.recalls if key in run.tools)}
        if own:
            metadata[METADATA_KEY] = sorted(own)
        event = KnowledgeEvent(user_id=run.user_id, query=run.query, response=answer, session_id=run.session_id,
                               agent_id=run.agent_id, intermediate_steps=steps, metadata=metadata, id=run_id.hex)
        self.memory.ingest(event)

    def _send_feedback(self, ids: Sequence[str], signal: str) -> None:
        try:
            self._rate(ids, signal)
        except Exception:
            self._failed("feedback")

    def _rate(self, ids: Sequence[str], signal: str) -> list[str]:
        """Send ``signal`` to the memories ``ids``; return the ids that got it.

        The store refuses the whole batch when one id is unknown, and a memory a run used
        may be gone by the time it is rated (merged into a duplicate, expired, deleted):
        then each is rated on its own, and the gone ones are skipped and logged rather
        than costing the others their signal."""
        ids = list(ids)
        try:
            self.memory.feedback(ids, signal)
            return ids
        except NotFoundError:
            if len(ids) < 2:
                rated: list[str] = []
            else:
                rated = [i for i in ids if self._rate_one(i, signal)]
        skipped = [i for i in ids if i not in rated]
        logger.warning("BeeWeave: %d memories were gone before the %r feedback (merged or deleted); "
                       "skipped: %s", len(skipped), signal, ", ".join(skipped))
        return rated

    def _rate_one(self, memory_id: str, signal: str) -> bool:
        try:
            self.memory.feedback([memory_id], signal)
            return True
        except NotFoundError:
            return False

    # -- agents, tools, retrievers: nested runs ---------------------------------------------
    @_guarded
    def on_agent_action(self, action: AgentAction, *, run_id: UUID, parent_run_id: UUID | None = None,
                        **kwargs: Any) -> None:
        run = self._run_of(run_id)
        if run is not None:
            run.actions.append(ToolCall(str(action.tool), jsonable(action.tool_input)))

    @_guarded
    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, inputs: dict[str, Any] | None = None,
                      **kwargs: Any) -> None:
        run = self._join(run_id, parent_run_id)
        if run is not None:
            name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
            run.tools[run_id] = ToolCall(str(name), jsonable(inputs if inputs is not None else input_str))

    @_guarded
    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        run = self._run_of(run_id)
        call = run.tools.get(run_id) if run is not None else None
        if call is not None:
            call.output = jsonable(output)

    @_guarded
    def on_tool_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                      **kwargs: Any) -> None:
        run = self._run_of(run_id)
        call = run.tools.get(run_id) if run is not None else None
        if call is not None:
            call.error = f"{type(error).__name__}: {error}"

    @_guarded
    def on_retriever_start(self, serialized: dict[str, Any] | None, query: str, *, run_id: UUID,
                           parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                           **kwargs: Any) -> None:
        run = self._join(run_id, parent_run_id)
        if run is not None and (metadata or {}).get("ls_retriever_name") == RETRIEVER_NAME:
            run.retrievals.add(run_id)
            if parent_run_id in run.tools:  # a tool that searches BeeWeave is a memory tool
                run.recalls.add(parent_run_id)

    @_guarded
    def on_retriever_end(self, documents: Sequence[Document], *, run_id: UUID,
                         parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        run = self._run_of(run_id)
        if run is None or run_id not in run.retrievals:
            return
        for doc in documents:
            memory_id = doc.metadata.get("id")
            if isinstance(memory_id, str) and memory_id not in run.used:
                run.used.append(memory_id)
                run.texts[memory_id] = doc.page_content

    # -- the user's rating ---------------------------------------------------------------
    def feedback(self, run_id: UUID | str, signal: str) -> list[str]:
        """Forward a user's rating ("up" or "down") of a finished run to the memories it used.

        Returns the ids of those memories that got the rating: one merged or deleted since
        the run is skipped (and logged). Raises ``NotFoundError`` for a run this handler
        did not follow (or has forgotten: it keeps the last ``keep_runs``), and
        ``InvalidInputError`` for a ``run_id`` that is not a UUID.
        """
        try:
            key = run_id if isinstance(run_id, UUID) else UUID(str(run_id))
        except ValueError:
            raise InvalidInputError(f"run_id must be a UUID, got {run_id!r}") from None
        with self._lock:
            ids = self._finished.get(key)
        if ids is None:
            raise NotFoundError(f"no finished run {key} is known to this handler "
                                f"(it remembers the last {self.keep_runs} runs)")
        return self._rate(ids, signal)
