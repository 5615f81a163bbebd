"""Which memories of a session are conversation turns, and so lend and take context.

Session context (``context.py``) helps where a session is a conversation: a turn such
as "how did it go?" is about what the turns around it say. Where a session is a batch
of unrelated facts (an FAQ imported under one session id, a day's notes), folding a
neighbour's words and vector into a memory only blurs it: the FAQ entry that answers a
question loses to the one beside it. So, by default (``SessionContext.AUTO``), only
memories that show they are turns of a conversation have neighbours, and only among
themselves. The evidence is read from the memory when it is written:

* it was ingested from an agent run (``BeeWeave.ingest``: the question and answer, and
  the tool results of that run);
* its metadata names who said it (a ``speaker`` or ``role`` key, as chat messages carry);
* its text opens with a speaker tag ("Caroline: ...", "用户：...", "[user] ..."). A tag
  of one character ("Q:", "A:", "问：") is taken for a label of a question-answer pair,
  not for a speaker, and a Chinese or Japanese tag longer than four characters for a
  clause, not a name.

Anything else (``add``/``add_many`` of plain records, document chunks, derived
memories) is a fact scored on its own text. ``SessionContext.ALL`` gives every memory
with a session its neighbours (the behaviour of stores saved before this choice
existed); ``context_radius=0`` turns context off.

The verdict is stored with the record (a column on both backends), so reopening,
rebuilding or repairing an index gives the same neighbours.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..records import KnowledgeChunk

__all__ = ["SessionContext", "is_turn", "lends_context"]


class SessionContext(str, Enum):
    """Which memories with a session get session context (``IndexConfig.session_context``)."""

    AUTO = "auto"  # conversation turns only, told by the evidence in the module docstring
    ALL = "all"  # every memory with a session


# Ingestion roles of the memories of an agent run (ingest/pipeline.py).
_RUN_ROLES = frozenset({"turn", "tool"})
_SPEAKER_KEYS = ("speaker", "role")
# A speaker tag opening the text: a name of two to twenty-one characters, up to three
# words, not ending in a digit ("At 10:30" is no tag), then a colon; or a bracketed role.
_SPEAKER_TAG = re.compile(
    r"^[ \t]*(?:<\|im_start\|>[ \t]*\w+|\[[^\]\n]{1,30}\]"
    r"|[^\W\d](?:[\w.'-]{1,20}|[\w.'-]{0,20}(?: [^\W\d][\w.'-]{0,20}){1,2})[ \t]*[:：])"
)

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
_CJK_NAME = 4  # characters


def is_turn(chunk: KnowledgeChunk) -> bool:
    """Whether the memory shows it is a turn of a conversation (see the module docstring)."""
    meta = chunk.metadata
    ingest = meta.get("ingest")
    if isinstance(ingest, Mapping) and ingest.get("role") in _RUN_ROLES:
        return True
    if any(isinstance(meta.get(k), str) and meta[k].strip() for k in _SPEAKER_KEYS):
        return True
    m = _SPEAKER_TAG.match(chunk.raw_content)
    # Chinese and Japanese write without spaces: a clause before a full-width colon
    # ("活动的主要内容是：...") is no name; names and roles (用户, 客服, 张三丰) are short.
    return m is not None and not (_CJK.search(m.group()) and len(m.group().strip(" \t:：")) > _CJK_NAME)


def lends_context(chunk: KnowledgeChunk, mode: SessionContext) -> bool:
    """Whether the memory takes part in its session's context under ``mode``."""
    return chunk.session_id is not None and (mode is SessionContext.ALL or is_turn(chunk))
