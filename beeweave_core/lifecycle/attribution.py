"""Which memories an answer drew on, and what the next turn or a tool's result says about them.

An agent is given a handful of memories and uses some. Rating all of them ``used`` teaches the
store that an irrelevant memory was useful; here a memory counts as used only when the final
answer or the tool calls carry its evidence (its words, or its meaning when an embedding
function is given). The user's next message can then rate what was used (thanks → ``up``,
"that's wrong" → ``down``), and a tool call that failed after drawing on a memory rates that
memory ``down``. The faces (LangChain middleware and callbacks) call these functions; the
rules live only here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any

from ..config_rules import TEXT, Choice, Items, Number, Rule, check_fields
from .config import FeedbackSignal

__all__ = ["AttributionConfig", "Reaction", "drawn_on", "reaction", "reaction_signal", "tool_failed", "tool_text"]

# Cues of the user's next message, English and Chinese; whole words for English, substrings for
# Chinese (no spaces between words). Checked in this order: a correction beats a thank-you. A
# thank-you cue does not count when negated ("没有用", "not perfect", "no thanks") or asked
# ("解决了吗？").
DOWN_CUES = ("that's wrong", "that is wrong", "thats wrong", "not right", "incorrect", "doesn't work",
             "does not work", "didn't work", "did not work", "still broken", "still failing", "wrong answer",
             "not what i asked", "不对", "错了", "不是这样", "不行", "没用", "没有用", "还是不行", "还是报错",
             "继续报错", "没解决", "没有解决")
INCOMPLETE_CUES = ("and then?", "what else", "what next", "go on", "and then what", "then what", "is that all",
                   "然后呢", "还有呢", "接下来呢", "继续", "还有吗")
UP_CUES = ("thanks", "thank you", "thx", "solved", "that worked", "it works", "works now", "perfect",
           "great, that", "exactly", "fixed it", "谢谢", "多谢", "解决了", "好了", "可以了", "有用", "完美")


class Reaction(str, Enum):
    """What the user's next message says about the previous answer."""

    UP = "up"  # thanks, solved
    DOWN = "down"  # that's wrong
    INCOMPLETE = "incomplete"  # and then? (the answer was not wrong, only short)


@dataclass(frozen=True)
class AttributionConfig:
    """Thresholds and cue lists.

    Attributes:
        lexical: the share of a memory's terms the answer (and tool calls) must contain.
        semantic: the cosine between a memory and the answer that also counts as drawing on
            it (only when an embedding function is given).
        up_cues, down_cues, incomplete_cues: phrases of the next user message (case is
            ignored; English phrases match whole words).
        incomplete_signal: the feedback an "and then?" sends (None: none, the answer was not
            wrong).
    """

    lexical: float = 0.6
    semantic: float = 0.8
    up_cues: tuple[str, ...] = UP_CUES
    down_cues: tuple[str, ...] = DOWN_CUES
    incomplete_cues: tuple[str, ...] = INCOMPLETE_CUES
    incomplete_signal: FeedbackSignal | None = None

    def __post_init__(self) -> None:
        check_fields(self, _ATTRIBUTION_RULES)


_ATTRIBUTION_RULES: dict[str, Rule] = {
    "lexical": Number(0, 1), "semantic": Number(0, 1), "up_cues": Items(TEXT), "down_cues": Items(TEXT),
    "incomplete_cues": Items(TEXT), "incomplete_signal": Choice(FeedbackSignal, optional=True),
}


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    from ..tokenizer import Tokenizer

    return Tokenizer()


def _terms(text: str) -> set[str]:
    return set(_tokenizer().tokenize(text)) if text.strip() else set()


def tool_text(tool: str, input: Any = None) -> str:  # noqa: A002 - the ToolCall field's name
    """What a tool call says, as text: its name and its input (JSON for structured input)."""
    if input is None:
        return tool
    body = input if isinstance(input, str) else json.dumps(input, ensure_ascii=False, default=str)
    return f"{tool} {body}"


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(math.fsum(x * x for x in a)), math.sqrt(math.fsum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def drawn_on(memories: Mapping[str, str], answer: str, tool_calls: Sequence[str] = (), *,
             embed: Callable[[str], Sequence[float]] | None = None,
             config: AttributionConfig | None = None) -> list[str]:
    """The ids of ``memories`` (id -> text) whose evidence is in the answer or the tool calls,
    in the given order: at least ``config.lexical`` of a memory's terms appear there, or, with
    ``embed``, the memory's vector is within ``config.semantic`` cosine of the answer's."""
    cfg = config or AttributionConfig()
    said = " ".join([answer, *tool_calls])
    said_terms = _terms(said)
    said_vec = embed(said) if embed is not None and said.strip() else None
    out = []
    for cid, text in memories.items():
        own = _terms(text)
        if own and len(own & said_terms) / len(own) >= cfg.lexical:
            out.append(cid)
        elif said_vec is not None and text.strip() and _cosine(embed(text), said_vec) >= cfg.semantic:  # type: ignore[misc]
            out.append(cid)
    return out


def _spans(text: str, cue: str) -> list[tuple[int, int]]:
    if cue.isascii():
        return [m.span() for m in re.finditer(r"(?<!\w)" + re.escape(cue.lower()) + r"(?!\w)", text)]
    return [m.span() for m in re.finditer(re.escape(cue), text)]


def _has(text: str, cue: str) -> bool:
    return bool(_spans(text, cue))


# A clause ends at punctuation; a sentence at a full stop, a question mark or an exclamation.
_CLAUSE_END = re.compile(r"[,，;；:：.。!！?？\n、]")
_SENTENCE_END = re.compile(r"[.。!！?？\n]")
# Negations in the few words (English) or characters (Chinese) of the clause before a cue.
_NEGATION_EN = re.compile(r"(?<!\w)(?:not|no|never|nor|without|hardly|\w+n't|cannot)(?!\w)")
_NEGATION_ZH = re.compile(r"[没不别未无非]")
_NOT_A_NEGATION_ZH = ("不错", "不客气", "非常")  # 不/非 in words that do not negate what follows


def _negated(text: str, start: int) -> bool:
    """Whether the cue at ``start`` follows a negation in its clause: one of the three words
    before it (English) or the two characters before it (Chinese)."""
    ends = list(_CLAUSE_END.finditer(text, 0, start))
    before = text[ends[-1].end() if ends else 0:start]
    if _NEGATION_EN.search(" ".join(re.findall(r"[\w']+", before)[-3:])):
        return True
    near = before.replace(" ", "")
    for word in _NOT_A_NEGATION_ZH:
        near = near.replace(word, "")
    return _NEGATION_ZH.search(near[-2:]) is not None


def _asked(text: str, end: int) -> bool:
    """Whether the cue ending at ``end`` is in a question (its sentence ends with ? or 吗)."""
    stop = _SENTENCE_END.search(text, end)
    rest = text[end:stop.start() if stop else len(text)].rstrip()
    return (stop is not None and stop.group() in "?？") or rest.endswith("吗")


def _affirms(text: str, cue: str) -> bool:
    """Whether a positive cue is said as such: neither negated nor asked."""
    return any(not _negated(text, a) and not _asked(text, b) for a, b in _spans(text, cue))


def reaction(text: str, config: AttributionConfig | None = None) -> Reaction | None:
    """What the user's message says about the previous answer, or None when it says nothing.

    A correction beats an "and then?", which beats a thank-you; a thank-you cue counts only
    when not negated in its clause ("没有用", "不完美", "not perfect", "no thanks") and not in a
    question ("解决了吗？")."""
    cfg = config or AttributionConfig()
    low = text.lower().replace("’", "'")
    if any(_has(low, c) for c in cfg.down_cues):
        return Reaction.DOWN
    if any(_has(low, c) for c in cfg.incomplete_cues):
        return Reaction.INCOMPLETE
    if any(_affirms(low, c) for c in cfg.up_cues):
        return Reaction.UP
    return None


def reaction_signal(text: str, config: AttributionConfig | None = None) -> FeedbackSignal | None:
    """The feedback the user's message sends to the memories the previous answer used."""
    cfg = config or AttributionConfig()
    got = reaction(text, cfg)
    if got is Reaction.UP:
        return FeedbackSignal.UP
    if got is Reaction.DOWN:
        return FeedbackSignal.DOWN
    if got is Reaction.INCOMPLETE:
        return cfg.incomplete_signal
    return None


_EXIT = re.compile(r"\b(?:exit(?:ed)?(?:\s+with)?[ _-]?(?:code|status)|return[ _-]?code|returncode)\b"
                   r"[\"']?\s*[:=]?\s*(-?\d+)", re.IGNORECASE)
# An error *label* at the start of the text ("Error: ...", "ERROR ...", "[error] ...",
# "ValueError: ...", "错误：...", "执行失败：...", "无法连接..."), or a Python traceback anywhere.
# A sentence that merely starts with the word ("Error rate dropped ...") is not one.
_ERROR = re.compile(
    r"^\s*(?:"
    r"(?i:\[?(?:error|exception|fatal)\]?\s*[:：!\]])"  # Error: / error: / fatal: / [error]
    r"|(?:ERROR|FATAL|EXCEPTION)\b"  # a log level, upper case
    r"|[A-Za-z_][\w.]*(?:Error|Exception)\s*[:：]"  # ValueError: / requests.HTTPError:
    r"|[\[【(（]?[\u4e00-\u9fff]{0,4}?(?<![无没未有])(?:错误|报错|失败|异常|出错)[\]】)）]?\s*[:：]"  # 错误：/ 执行失败：
    r"|(?:无法|不能)[\u4e00-\u9fff]|(?:连接|访问|权限)(?:被)?拒绝"  # 无法连接… / 连接被拒绝
    r")"
    r"|Traceback \(most recent call last\)")


# A structured result's own word for its outcome: ``{"status": "failed"}`` (any case).
_FAILED_STATUSES = frozenset({"error", "errored", "fail", "failed", "failure"})


def _json_object(text: str) -> Mapping[str, Any] | None:
    """The object a tool's text holds when the whole text is one JSON object (tools often
    return their structured result serialized), else None."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


def _mapping_failed(output: Mapping[str, Any]) -> bool | None:
    """What a structured result says of its outcome: True (failed), False (an exit code of 0
    or a success HTTP status), or None (nothing decisive)."""
    for key in ("exit_code", "returncode", "exit_status", "status_code"):
        code = output.get(key)
        if isinstance(code, int) and not isinstance(code, bool):
            return code != 0 and not (key == "status_code" and 200 <= code < 400)
    status = output.get("status")
    if isinstance(status, str) and status.strip().casefold() in _FAILED_STATUSES:
        return True
    if output.get("ok") is False or output.get("success") is False:
        return True
    if output.get("error"):
        return True
    return None


def tool_failed(output: Any = None, error: str | None = None) -> bool:
    """Whether a tool call failed: it raised (``error``), its structured result (a mapping,
    or a text that is one JSON object) reports a non-zero exit code (``exit_code`` /
    ``returncode`` / ``exit_status``, or an HTTP ``status_code`` outside 200..399), a failed
    ``status`` ("failed", "failure", "fail", "error", "errored"; any case), ``ok`` or
    ``success`` false, or an ``error``; or its text reports a non-zero exit code, starts with an
    error label (``Error:``, ``ERROR``, ``ValueError:``, ``错误：``, ``执行失败：``, ``无法…``; not
    the bare word, as in "Error rate dropped") or holds a Python traceback."""
    if error:
        return True
    structured = output if isinstance(output, Mapping) else _json_object(output) if isinstance(output, str) else None
    if structured is not None:
        said = _mapping_failed(structured)
        if said is not None:
            return said
    if isinstance(output, Mapping):
        output = json.dumps(output, ensure_ascii=False, default=str)
    if not isinstance(output, str):
        return False
    if any(m.group(1) != "0" for m in _EXIT.finditer(output)):
        return True
    return _ERROR.search(output) is not None
