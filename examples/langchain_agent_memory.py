"""An agent that learns in one session and recalls it in the next.

Session 1: the agent looks up a configuration value with a tool; BeeWeaveCallbackHandler
captures the question, the tool call and the answer, and BeeWeave turns the run into
memories. Session 2 (the store reopened, the lookup tool gone): the agent answers from
memory through a BeeWeaveRetriever tool, and the handler marks those memories as used.

    python examples/langchain_agent_memory.py

Offline it plays a scripted model (the recalled memory is real; the wording of the
answers is scripted); with OPENAI_API_KEY and langchain-openai it uses a real model.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import create_retriever_tool, tool
from langchain_models import chat_model, tool_call

from beeweave_core import BeeWeave
from beeweave_langchain import BeeWeaveCallbackHandler, BeeWeaveRetriever

QUESTION_1 = "Which port does the staging database listen on?"
QUESTION_2 = "Remind me: what port did we find for the staging database?"


@tool
def lookup_config(key: str) -> str:
    """Look up a value in the team's configuration registry."""
    registry = {"staging database port": "staging-db.internal:5433 (PostgreSQL 16, owned by the dba team)",
                "production database port": "prod-db.internal:5432 (PostgreSQL 16, owned by the dba team)"}
    return registry.get(key.lower(), "no such key")


def ask(agent: Any, question: str, handler: BeeWeaveCallbackHandler) -> str:
    state = agent.invoke({"messages": [{"role": "user", "content": question}]}, config={"callbacks": [handler]})
    return state["messages"][-1].text


def main(path: str | Path | None = None, embedder: Any = None) -> dict[str, Any]:
    """Run both sessions; return the answers and what session 2 recalled."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(path) if path is not None else Path(tmp) / "agent-memory.db"

        with BeeWeave(db, embedder=embedder) as memory:  # session 1: learn
            handler = BeeWeaveCallbackHandler(memory, user_id="alice", session_id="monday", agent_id="ops-bot")
            agent = create_agent(chat_model([
                tool_call("lookup_config", key="staging database port"),
                "The staging database listens on port 5433.",
            ]), [lookup_config])
            answer_1 = ask(agent, QUESTION_1, handler)
            memory.flush()  # wait until the run has become memories
            print(f"session 1: {QUESTION_1}\n  -> {answer_1}")

        with BeeWeave(db, embedder=embedder) as memory:  # session 2: recall
            handler = BeeWeaveCallbackHandler(memory, user_id="alice", session_id="tuesday", agent_id="ops-bot")
            retriever = BeeWeaveRetriever(memory=memory, user_id="alice", k=3)
            recall = create_retriever_tool(retriever, "recall", "Search what you learnt in earlier sessions.")
            agent = create_agent(chat_model([
                tool_call("recall", query="staging database port"),
                "We found that the staging database listens on port 5433.",
            ]), [recall])
            answer_2 = ask(agent, QUESTION_2, handler)
            recalled = [d.page_content for d in retriever.invoke("staging database port")]
            used = handler.feedback(handler.last_run_id, "up")  # the user liked the answer
            memory.flush()
            print(f"session 2: {QUESTION_2}\n  -> {answer_2}")
            print("  recalled:", *(" / ".join(t.split("\n\n")) for t in recalled), sep="\n    ")
            return {"answers": [answer_1, answer_2], "recalled": recalled, "used": used, "errors": handler.errors}


if __name__ == "__main__":
    main()
