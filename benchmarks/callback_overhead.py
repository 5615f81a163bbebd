"""What BeeWeaveCallbackHandler adds to a run, in milliseconds (p50 / p99).

Each workload (a scripted chat model and a trivial tool) runs N times without and N
times with the handler, interleaved so that drift hits both alike: first with a
handler on a no-op store, then with one on an in-memory BeeWeave (hashing
embedder). Figures per row, each "p50 / p99" in ms per run:

- "adapter CPU": CPU time of the calling thread inside the handler's callbacks when
  the store does nothing: the cost of the LangChain adapter itself;
- "with ingest CPU": the same with ``BeeWeave.ingest`` (validation and the durable
  queue write); CPU time does not count waiting while other processes or threads
  (the ingestion worker) run;
- "with ingest wall": wall-clock time inside the callbacks (that waiting included);
- "run delta": whole runs with the BeeWeave handler minus without (this also holds
  LangChain's dispatch to one more handler, and noise).

    python benchmarks/callback_overhead.py --runs 500
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "examples"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain.agents import create_agent  # noqa: E402
from langchain_classic.agents import AgentExecutor, create_tool_calling_agent  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_models import ScriptedChatModel, tool_call  # noqa: E402

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402
from beeweave_langchain import BeeWeaveCallbackHandler  # noqa: E402

QUESTION = "Which port does the staging database listen on?"
ANSWER = "The staging database listens on port 5433."
CALLBACKS = ("on_chain_start", "on_chain_end", "on_chain_error", "on_tool_start", "on_tool_end", "on_tool_error",
             "on_agent_action", "on_retriever_start", "on_retriever_end")


@tool
def lookup_config(key: str) -> str:
    """Look up a value in the configuration registry."""
    return "5433"


class NoStore:
    """Accepts events and feedback and does nothing: isolates the adapter's own cost."""

    def ingest(self, event: Any) -> str:
        return event.id

    def feedback(self, chunk_ids: Any, signal: Any) -> list[Any]:
        return []


class TimedHandler(BeeWeaveCallbackHandler):
    """The handler, with the time spent in its callbacks added up."""

    spent = 0.0  # wall-clock seconds in the callbacks since the last reset
    spent_cpu = 0.0  # CPU seconds of the calling thread in the callbacks


def _timed(name: str) -> Callable[..., None]:
    inner = getattr(BeeWeaveCallbackHandler, name)

    def timed(self: TimedHandler, *args: Any, **kwargs: Any) -> None:
        t0, c0 = time.perf_counter(), time.thread_time()
        inner(self, *args, **kwargs)
        self.spent_cpu += time.thread_time() - c0
        self.spent += time.perf_counter() - t0

    return timed


for _name in CALLBACKS:
    setattr(TimedHandler, _name, _timed(_name))


def workloads() -> dict[str, Callable[[list[Any]], Any]]:
    """Name -> a function that runs one request with the given callbacks."""
    replies = [tool_call("lookup_config", key="staging database port"), AIMessage(ANSWER)]
    graph = create_agent(ScriptedChatModel(responses=replies), [lookup_config])
    prompt = ChatPromptTemplate.from_messages([("human", "{input}"), MessagesPlaceholder("agent_scratchpad")])
    executor = AgentExecutor(agent=create_tool_calling_agent(ScriptedChatModel(responses=replies), [lookup_config],
                                                             prompt), tools=[lookup_config])
    chain = (ChatPromptTemplate.from_messages([("human", "{input}")])
             | ScriptedChatModel(responses=[AIMessage(ANSWER)]) | StrOutputParser())
    return {
        "LCEL chain: prompt, model, parser": lambda cb: chain.invoke({"input": QUESTION}, config={"callbacks": cb}),
        "create_agent, 1 tool call": lambda cb: graph.invoke(
            {"messages": [{"role": "user", "content": QUESTION}]}, config={"callbacks": cb}),
        "AgentExecutor, 1 tool call": lambda cb: executor.invoke({"input": QUESTION}, config={"callbacks": cb}),
    }


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def measure(run: Callable[[list[Any]], Any], handler: TimedHandler, runs: int, warmup: int) -> dict[str, list[float]]:
    """Runs without and with ``handler``, interleaved; wall times and time inside the handler (ms)."""
    out: dict[str, list[float]] = {"base": [], "wall": [], "inside": [], "cpu": []}
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        run([])
        t1 = time.perf_counter()
        handler.spent = handler.spent_cpu = 0.0
        run([handler])
        t2 = time.perf_counter()
        if i >= warmup:
            out["base"].append((t1 - t0) * 1e3)
            out["wall"].append((t2 - t1) * 1e3)
            out["inside"].append(handler.spent * 1e3)
            out["cpu"].append(handler.spent_cpu * 1e3)
    return out


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args(argv)

    rows = []
    runs = workloads()
    # Two passes, so that the ingestion worker of the second does not slow the first down.
    adapter = TimedHandler(NoStore(), user_id="bench")
    alone = {name: measure(run, adapter, args.runs, args.warmup) for name, run in runs.items()}
    with BeeWeave(embedder=HashingEmbedder(64)) as memory:
        handler = TimedHandler(memory, user_id="bench", session_id="bench")
        for name, run in runs.items():
            m = measure(run, handler, args.runs, args.warmup)
            a = alone[name]
            rows.append({"workload": name, "run": pct(m["base"], 50),
                         "adapter_cpu": (pct(a["cpu"], 50), pct(a["cpu"], 99)),
                         "ingest_cpu": (pct(m["cpu"], 50), pct(m["cpu"], 99)),
                         "ingest_wall": (pct(m["inside"], 50), pct(m["inside"], 99)),
                         "delta": (pct(m["wall"], 50) - pct(m["base"], 50), pct(m["wall"], 99) - pct(m["base"], 99))})
        t0 = time.perf_counter()
        drained = memory.flush(timeout=120)
        flush_s = time.perf_counter() - t0
        events = len(rows) * (args.runs + args.warmup)

    print(f"BeeWeaveCallbackHandler overhead per run, {args.runs} runs each (ms; scripted model, in-memory store)\n")
    print("| workload | run p50 | adapter CPU | with ingest CPU | with ingest wall | run delta |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        cells = " | ".join(f"{r[k][0]:.3f} / {r[k][1]:.3f}" for k in ("adapter_cpu", "ingest_cpu", "ingest_wall"))
        print(f"| {r['workload']} | {r['run']:.2f} | {cells} | {r['delta'][0]:+.2f} / {r['delta'][1]:+.2f} |")
    errors = adapter.errors + handler.errors
    print(f"\nhandler errors: {errors}; {events} events ingested in the background, "
          f"flush() after the runs took {flush_s:.2f} s (drained: {drained})")
    return rows


if __name__ == "__main__":
    main()
