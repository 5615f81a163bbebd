"""The chat model the LangChain examples use.

With ``OPENAI_API_KEY`` set and ``langchain-openai`` installed they talk to a real model
(``BEEWEAVE_EXAMPLE_MODEL``, default gpt-4o-mini); otherwise a scripted fake model plays
the given replies, so that every example runs offline (and in the test suite).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage


class ScriptedChatModel(FakeMessagesListChatModel):
    """Plays its replies in order (tool calls included); accepts tools like a real model."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self


def real_model_configured() -> bool:
    return bool(os.environ.get("OPENAI_API_KEY")) and importlib.util.find_spec("langchain_openai") is not None


def chat_model(script: Sequence[BaseMessage | str]) -> BaseChatModel:
    """A real model if one is configured, else a fake one that replies with ``script``."""
    if real_model_configured():
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=os.environ.get("BEEWEAVE_EXAMPLE_MODEL", "gpt-4o-mini"), temperature=0)
    return ScriptedChatModel(responses=[m if isinstance(m, BaseMessage) else AIMessage(m) for m in script])


def tool_call(name: str, **args: Any) -> AIMessage:
    """A scripted model turn that calls one tool."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{name}"}])
