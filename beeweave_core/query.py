"""Queries that are a conversation: an agent passing its recent context as the query.

A memory-augmented chatbot often asks with the dialogue so far ("User: ... Assistant: ...
User: ..."). Taken as one bag of words, the oldest small talk weighs as much as the last
question, markup and role tags become terms, and a 20-turn context costs 20 times a
question. ``prepare_query`` turns such a text into:

- the text to embed: the latest turns, up to ``QueryLimits.embed_chars`` characters
  (an embedder truncates anyway; this keeps the latest, not the first, and bounds the
  cost), and
- lexical term counts in which a term of the latest turn counts more than one of an
  older turn (``QueryLimits.recency``), capped at ``QueryLimits.max_terms`` distinct
  terms, the heaviest kept.

A query that is not a dialogue (fewer than ``min_turns`` tagged turns) only loses its
markup and keeps its plain term counts, so questions are searched as before.

A query that asks several things at once ("What is my cousin's phone number? And which
appliance do I like?") is split into its questions (``split_questions``): searched as one
bag of words, the question with the rarer terms takes the whole top k and the other finds
nothing; searched one by one, each brings its own best memories.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["QueryLimits", "PreparedQuery", "prepare_query", "split_questions", "split_turns", "strip_markup"]


@dataclass(frozen=True)
class QueryLimits:
    """Bounds and weights for dialogue queries.

    Attributes:
        min_turns: how many speaker-tagged turns make a text a dialogue.
        recency: term weight of the latest turn, the one before, ...; older turns get the last.
        max_terms: distinct lexical terms kept (the heaviest).
        embed_turns: how many of the latest turns are embedded (the last one asks; the one
            before often says what it is about).
        embed_chars: characters of the latest turns embedded at most.
        lexical_chars: characters of the latest turns tokenized (segmenting Chinese costs
            time in proportion to its length: this bounds a long dialogue's lexical cost).
        max_chars: characters of a dialogue read at all (the latest).
        max_questions: how many questions of one query are searched one by one (a query
            that asks more is searched whole).
        question_chars: a query longer than this is not split into questions.
    """

    min_turns: int = 3
    recency: tuple[int, ...] = (6, 2, 1)
    max_terms: int = 64
    embed_turns: int = 2
    embed_chars: int = 600
    lexical_chars: int = 1000
    max_chars: int = 8000
    max_questions: int = 4
    question_chars: int = 400


@dataclass(frozen=True)
class PreparedQuery:
    text: str  # what to embed
    terms: dict[str, int]  # lexical term -> weight (a count)
    turns: int  # dialogue turns found (0: not a dialogue)


# A speaker tag opening a line: "User:", "Assistant：", "Caroline Smith:", "[user]", "<|im_start|>user",
# "用户：". A name is up to three words and does not end in a digit, so "At 10:30" is no tag; one
# tag alone ("Note: ...") does not make a dialogue either (``min_turns`` do).
_COLON_TAG = re.compile(
    r"^[ \t]*(?:<\|im_start\|>[ \t]*\w+[ \t]*\n?|\[[^\]\n]{1,30}\][ \t]*[:：]?"
    r"|[^\W\d][\w.'-]{0,20}(?: [^\W\d][\w.'-]{0,20}){0,2}[ \t]*[:：])",
    re.M,
)
_MARKUP = [
    (re.compile(r"```.*?```", re.S), " "),  # code blocks: not what a memory says
    (re.compile(r"<\|[^|>]{1,40}\|>"), " "),  # chat-template tokens
    (re.compile(r"<[^<>\n]{1,200}>"), " "),  # HTML/XML tags
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),  # images: their alt text
    (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),  # links: their text
    (re.compile(r"https?://\S+"), " "),
    (re.compile(r"(?m)^\s{0,3}(?:#{1,6}|>|[-*+]|\d+[.)])\s+"), ""),  # headings, quotes, list bullets
    (re.compile(r"[*_~`]{1,3}"), ""),  # emphasis, inline code
]


def strip_markup(text: str) -> str:
    """Markdown, HTML and chat-template markup removed; the words kept."""
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return html.unescape(text)


def split_turns(text: str) -> list[str]:
    """The turns of a dialogue, oldest first, without their speaker tags; ``[]`` when fewer
    than two lines start with a speaker tag (then it is not a dialogue)."""
    starts = [m for m in _COLON_TAG.finditer(text)]
    if len(starts) < 2:
        return []
    turns = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        body = text[m.end() : end].strip()
        if body:
            turns.append(body)
    head = text[: starts[0].start()].strip()  # text before the first tag (a system prompt...)
    return ([head] if head else []) + turns


def prepare_query(text: str, tokenize: Callable[[str], list[str]], limits: QueryLimits | None = None) -> PreparedQuery:
    """The text to embed and the weighted lexical terms of a query (see the module's doc)."""
    limits = limits or QueryLimits()
    turns = split_turns(text[-limits.max_chars :]) if len(text) > 80 else []
    if len(turns) < limits.min_turns:
        clean = strip_markup(text) if _has_markup(text) else text
        counts: dict[str, int] = {}
        for t in tokenize(clean[-limits.max_chars :] if len(clean) > limits.max_chars else clean):
            counts[t] = counts.get(t, 0) + 1
        return PreparedQuery(clean if clean.strip() else text, _cap(counts, limits.max_terms), 0)
    turns = [strip_markup(t) for t in turns]
    weights: dict[str, int] = {}
    order: dict[str, int] = {}  # the newest turn a term was seen in, for ties
    read = 0
    for age, turn in enumerate(reversed(turns)):
        if read >= limits.lexical_chars:
            break
        turn = turn[-(limits.lexical_chars - read):]
        read += len(turn)
        w = limits.recency[min(age, len(limits.recency) - 1)]
        for t in tokenize(turn):
            weights[t] = weights.get(t, 0) + w
            order.setdefault(t, age)
    # The latest turns, newest last, within embed_chars.
    picked: list[str] = []
    size = 0
    for turn in reversed(turns):
        if picked and (size + len(turn) > limits.embed_chars or len(picked) >= limits.embed_turns):
            break
        picked.append(turn[-limits.embed_chars :])
        size += len(picked[-1])
    embed_text = "\n".join(reversed(picked))
    return PreparedQuery(embed_text, _cap(weights, limits.max_terms, order), len(turns))


# The end of a question: a question mark (ASCII or full-width), and the blanks after it.
_QUESTION_END = re.compile(r"(?<=[?？])\s*")


def split_questions(text: str, limits: QueryLimits | None = None) -> list[str]:
    """The questions of a query that asks several, each ending in its question mark (text
    after the last one stays with it); ``[text]`` when it asks one, is a dialogue, asks
    more than ``max_questions`` or is longer than ``question_chars``."""
    limits = limits or QueryLimits()
    if len(text) > limits.question_chars or ("?" not in text and "？" not in text):
        return [text]
    parts = [p for p in _QUESTION_END.split(text.strip()) if p]
    if parts and parts[-1][-1] not in "?？" and len(parts) > 1:  # a tail that asks nothing
        parts[-2:] = [parts[-2] + " " + parts[-1]]
    if not 2 <= len(parts) <= limits.max_questions or len(split_turns(text)) >= 2:
        return [text]
    return parts


def _has_markup(text: str) -> bool:
    return any(c in text for c in "<>[]*_`#~") or "http" in text


def _cap(weights: dict[str, int], max_terms: int, order: dict[str, int] | None = None) -> dict[str, int]:
    """The ``max_terms`` heaviest terms (then the newest, then the first seen)."""
    if len(weights) <= max_terms:
        return weights
    age = order or {}
    ranked = sorted(weights, key=lambda t: (-weights[t], age.get(t, 0)))
    return {t: weights[t] for t in ranked[:max_terms]}
