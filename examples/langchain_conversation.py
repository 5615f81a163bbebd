"""A conversation with BeeWeaveMemory: recent turns verbatim, older turns summarised,
and long-term memories from earlier sessions.

Session 1 tells the assistant a few things; session 2 (a new memory object, a new
session) gets them back as long-term memories for its first question.

    python examples/langchain_conversation.py
"""

from __future__ import annotations

import warnings
from typing import Any

from langchain_classic.chains import ConversationChain
from langchain_core.prompts import PromptTemplate
from langchain_models import chat_model

from beeweave_core import BeeWeave
from beeweave_langchain import BeeWeaveMemory

PROMPT = PromptTemplate.from_template(
    "You are a helpful assistant.\n{long_term}\n\nConversation so far:\n{history}\n\nHuman: {input}\nAI:")

SESSION_1 = ["Hi, I'm Alice. I'm allergic to peanuts.", "I live in Lyon.", "I'm planning a dinner party on Saturday."]
SESSION_2 = "Can you suggest a dessert for my dinner party?"


def conversation(memory: BeeWeave, session_id: str, replies: list[str]) -> tuple[ConversationChain, BeeWeaveMemory]:
    short_term = BeeWeaveMemory(memory=memory, user_id="alice", session_id=session_id, window=2,
                                long_term_key="long_term")
    with warnings.catch_warnings():  # ConversationChain is deprecated in LangChain, and still in use
        warnings.simplefilter("ignore")
        chain = ConversationChain(llm=chat_model(replies), memory=short_term, prompt=PROMPT)
    return chain, short_term


def main(embedder: Any = None) -> dict[str, Any]:
    with BeeWeave(embedder=embedder) as memory:
        chain, short_term = conversation(memory, "s1", ["Nice to meet you, Alice!", "Lyon is lovely.", "Fun!"])
        for text in SESSION_1:
            print(f"Human: {text}\nAI: {chain.invoke({'input': text})['response']}")
        summary = short_term.summary
        print(f"  (summary of older turns: {summary!r})")
        memory.flush()  # the turns have become long-term memories

        chain, short_term = conversation(memory, "s2", ["A peanut-free lemon tart would be perfect."])
        seen = short_term.load_memory_variables({"input": SESSION_2})
        reply = chain.invoke({"input": SESSION_2})["response"]
        print(f"--- next session ---\n{seen['long_term']}\nHuman: {SESSION_2}\nAI: {reply}")
        return {"long_term": seen["long_term"], "reply": reply, "summary_session_1": summary}


if __name__ == "__main__":
    main()
