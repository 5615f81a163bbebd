"""Recurring questions: a feature key per question, sightings in sliding windows, and a
high-priority memory for each question that becomes hot.

The key is the intent plus the sorted set of the question's index terms (the store's
tokenizer: stemmed, stop words removed; Chinese segmented by jieba) without the words
that only say *how* something is asked ("how", "please", "way", 怎么, 如何...). So
"How do I reset my password?", "how can I reset the password" and "Password reset - how?"
share the key ``information_query|password reset``, as do 怎么重置密码 and 如何重置我的密码.

Paraphrases that word the same question differently still meet: a question whose key is
new joins an earlier key of the same owner when their *concepts* match (the terms without
the words that ask about a state, "status", 状态, 为什么, 还没, and without a leading
negation, 没发 → 发): every concept of the shorter question matches one of the other's
(equal, a Chinese word inside the other, 发 / 发货, or an English prefix of at least three
letters, ship / shipment) and they share at least half of the longer one's. Candidates
are found through a small per-owner index from each concept to the keys holding it. So
我的订单怎么还没发, 订单发货状态是什么 and 我的订单为什么还没发货 are one pattern, whatever
intent each was classified with.

Numbers and identifiers that hold a digit (order 1001, iPhone13, 2024) are part of the key
and match only themselves: "What's the status of order 1001?" and "... order 1003?" are two
questions, and a pattern's memory must not pair one with the other's answer. Two questions
are paraphrases only when they name the same such terms.

Sightings are stored per key through the backend's key-value store (so they survive a
reopen), each with its event id: seeing the same event twice (a crash repair) changes
nothing.

A question asked by several users is also a shared pattern: a second tracker counts
everyone's questions together (``PatternScope.GLOBAL``, its own key namespace) and its
memory belongs to the tenant scope, so every user's search finds it. It is published only
when ``PatternConfig.shared_users`` different users asked (each sighting keeps a hash of
its user, never the id), so one user's repeated question never becomes shared text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any

from ..errors import InvalidInputError
from ..records import Intent
from ..tokenizer import BIGRAM_PREFIX, Tokenizer
from ..user_data import KV_SEP, Staged, mapping, named_entries, owned, sequence, user_entries
from .admission import AdmissionRules, Candidate, admit
from .config import PatternConfig, PatternScope
from .extract import FILLER, REDACTION_TOKEN

__all__ = ["HotPattern", "PatternTracker", "Sighting", "NAMESPACE"]

NAMESPACE = "ingest.patterns"
_SEP = "\x1f"
_CHINESE_FILLER = ("请问 请 问 一下 帮 帮忙 帮我 告诉 知道 想 想要 需要 应该 能不能 可不可以 是不是 有没有 "
                   "方法 办法 步骤 一个 该 呀 啦 哈").split()
INDEX = NAMESPACE + ".concepts"  # owner + concept -> the pattern keys holding it
# Words that ask about the state of something, not what it is: left out of concepts.
_STATE_WORDS = frozenset(("状态 情况 进度 什么 为什么 怎么 怎么样 怎样 如何 哪 哪里 哪儿 到哪 还 没 没有 未 是 吗 "
                          "呢 了 啊 status state yet still hasn haven isn doesn didn").split())
_NEGATION = ("没有", "没", "不", "未")
_INDEX_KEYS = 64  # keys kept per concept (the newest)


def _cjk(term: str) -> bool:
    return any("\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" for ch in term)


def concepts(terms: tuple[str, ...]) -> frozenset[str]:
    """A question's terms as concepts: state words dropped, a leading negation cut (没发 -> 发)."""
    out = set()
    for t in terms:
        if t in _STATE_WORDS:
            continue
        for neg in _NEGATION:
            if _cjk(t) and t.startswith(neg) and len(t) > len(neg):
                t = t[len(neg):]
                break
        out.add(t)
    return frozenset(out)


def _numbered(term: str) -> bool:
    return any(ch.isdigit() for ch in term)


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    if _numbered(a) or _numbered(b):  # order 1001 is not order 100 (no prefix, no substring)
        return False
    if _cjk(a) and _cjk(b):
        return a in b or b in a
    if a.isascii() and b.isascii() and min(len(a), len(b)) >= 3:
        return a.startswith(b) or b.startswith(a)
    return False


def paraphrase(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two questions' concepts say the same thing (see the module docstring)."""
    if not a or not b:
        return False
    if {t for t in a if _numbered(t)} != {t for t in b if _numbered(t)}:
        return False  # about another order, model or year: another question
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if not all(any(_same(s, t) for t in long_) for s in short):
        return False
    matched = sum(1 for t in long_ if any(_same(t, s) for s in short))
    return matched * 2 >= len(long_)


@dataclass(frozen=True)
class Sighting:
    """One asked question, as the pattern tracker sees it."""

    event_id: str
    user_id: str
    agent_id: str | None
    query: str
    intent: Intent
    at: datetime
    answer: str = ""  # the (redacted) answer the agent gave
    answer_id: str | None = None  # the memory holding question and answer
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class HotPattern:
    """A question asked often enough to pass a window's threshold."""

    key: str
    user_id: str
    intent: Intent
    terms: tuple[str, ...]
    query: str
    examples: tuple[str, ...]
    counts: dict[str, int]
    memory_id: str
    answer_id: str | None
    first_seen: datetime
    last_seen: datetime

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "intent": self.intent.value, "terms": list(self.terms),
                "examples": list(self.examples), "first_seen": self.first_seen.isoformat(),
                "last_seen": self.last_seen.isoformat()}


@dataclass(frozen=True)
class Detection:
    """A sighting of a hot key: the pattern, whether it just became hot, and its stored state."""

    pattern: HotPattern
    became_hot: bool
    kv_key: str
    state: dict[str, Any]
    refresh: bool = False  # time to refresh the memory's counts and best answer


def _user_hash(user_id: str) -> str:
    """What a shared pattern keeps of who asked: enough to count different users, not the id
    (its state is shared and survives the user's forget)."""
    return hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _pattern_state(user_id: str, value: dict[str, Any], where: str) -> list[str]:
    """Check a pattern's stored state of an export as ``hot`` and ``observe`` read it."""
    owned(value, where, user_id)
    try:
        Intent(value["intent"]), str(value["key"]), float(value["first_seen"])
        if not all(isinstance(t, str) for t in sequence(value["terms"], f"{where}.terms")):
            raise ValueError("terms must be strings")
        for h in sequence(value["hits"], f"{where}.hits"):
            float(sequence(h, f"{where}.hits[]")[0])
        for e in sequence(value["examples"], f"{where}.examples"):
            str(mapping(e, f"{where}.examples[]")["query"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"{where} is not a question pattern: {exc}") from None
    return []


def _concept_entry(user_id: str, value: dict[str, Any], where: str) -> list[str]:
    # Only the user's own keys: a crafted entry must not fold the user's questions into another's.
    keys = sequence(value.get("keys"), f"{where}.keys")
    if not all(isinstance(k, str) and k.startswith(user_id + KV_SEP) for k in keys):
        raise InvalidInputError(f"{where}.keys must be keys of the export's user")
    return []


def _ts(dt: datetime) -> float:
    return dt.timestamp()


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


class PatternTracker:
    """Counts sightings per feature key and reports keys that pass a threshold."""

    def __init__(self, backend: Any, tokenizer: Tokenizer, config: PatternConfig,
                 clock: Callable[[], datetime], admission: AdmissionRules | None = None, *,
                 namespace: str = NAMESPACE) -> None:
        self.backend = backend
        # The shared tracker beside a per-user one keeps its keys apart: each scans only its own.
        self.namespace, self.index_ns = namespace, namespace + ".concepts"
        # Users a shared pattern needs before it is published (see the module docstring).
        self.min_users = config.shared_users if config.scope is PatternScope.GLOBAL else 0
        self.admission = admission or AdmissionRules()
        self.tokenizer = tokenizer
        self.config = config
        self.clock = clock
        self._filler_terms: frozenset[str] | None = None
        self._longest = max(w.span for w in config.windows)

    # -- keys ----------------------------------------------------------------------------
    @property
    def _filler(self) -> frozenset[str]:
        # Cut with the store's tokenizer (so stems match), on first use: it may load jieba.
        if self._filler_terms is None:
            english = frozenset(t for w in FILLER for t in self.tokenizer(w))
            self._filler_terms = english | frozenset(_CHINESE_FILLER)
        return self._filler_terms

    def terms(self, query: str) -> tuple[str, ...]:
        """The normalized terms of a question (empty if nothing but filler is left)."""
        tokens = self.tokenizer(REDACTION_TOKEN.sub(" ", query))
        # Character bigrams (tokenizer v2's backoff for Chinese segmentation) help recall but
        # differ between paraphrases: a pattern's key is its words only.
        return tuple(sorted({t for t in tokens if t not in self._filler and not t.startswith(BIGRAM_PREFIX)}))

    def key(self, query: str, intent: Intent) -> str | None:
        terms = self.terms(query)
        return f"{Intent(intent).value}|{' '.join(terms)}" if terms else None

    def owner(self, user_id: str) -> str:
        return user_id if self.config.scope is PatternScope.USER else self.config.shared_user_id

    @staticmethod
    def memory_id(kv_key: str) -> str:
        return "pattern:" + hashlib.sha1(kv_key.encode("utf-8")).hexdigest()[:24]

    # -- counting ------------------------------------------------------------------------
    def counts(self, hits: list[list[Any]], now: datetime) -> dict[str, int]:
        out = {}
        for w in self.config.windows:
            since = _ts(now - w.span)
            out[w.name] = sum(1 for h in hits if h[0] > since)
        return out

    def is_hot(self, counts: dict[str, int], hits: list[list[Any]] | None = None) -> bool:
        """Whether a window reached its threshold (and, for a shared pattern, enough users
        asked: ``hits`` are the sightings kept)."""
        if not any(counts[w.name] >= w.threshold for w in self.config.windows):
            return False
        return not self.min_users or len({h[2] for h in hits or () if len(h) > 2}) >= self.min_users

    def observe(self, s: Sighting) -> Detection | None:
        """Record a sighting; return the pattern when it is hot (None otherwise)."""
        if not self.config.enabled:
            return None
        key = self.key(s.query, s.intent)
        if key is None:
            return None
        owner = self.owner(s.user_id)
        kv_key = owner + _SEP + key
        if self.backend.kv_get(self.namespace, kv_key) is None:
            kv_key = self._similar(owner, concepts(self.terms(s.query))) or kv_key
        now = self.clock()
        cutoff = _ts(now - self._longest)
        example = {"query": s.query, "answer": s.answer[:4000], "answer_id": s.answer_id, "at": _ts(s.at),
                   "tags": list(s.tags), "by": _user_hash(s.user_id)}
        seen: dict[str, Any] = {}

        def count(state: dict[str, Any] | None) -> dict[str, Any]:
            # Atomic (kv_update): sightings of one question in several processes all count.
            state = state or {"user_id": owner, "intent": Intent(s.intent).value, "key": key,
                              "terms": list(self.terms(s.query)), "hits": [], "examples": [],
                              "first_seen": _ts(s.at)}
            hits: list[list[Any]] = state["hits"]
            # An event id is one user's (two users' "turn-1" are two events): a sighting counted
            # already is the same id from the same user (hits kept before they named the user: the id).
            by = _user_hash(s.user_id)
            seen.update(again=any(h[1] == s.event_id and (len(h) < 3 or h[2] == by) for h in hits), new=not hits,
                        was_hot=self.is_hot(self.counts(hits, now), hits))
            if seen["again"]:
                return state  # already counted (the event was processed before a crash)
            hits = sorted([*hits, [_ts(s.at), s.event_id, by]], key=lambda h: h[0])
            state["hits"] = [h for h in hits if h[0] > cutoff][-self.config.max_hits:]
            state["examples"] = ([e for e in state["examples"] if e["query"] != s.query]
                                 + [example])[-self.config.max_examples:]
            return state

        kv_user = None if self.config.scope is PatternScope.GLOBAL else owner
        state = self.backend.kv_update(self.namespace, kv_key, count, user_id=kv_user)
        assert state is not None
        if seen["again"]:
            return None
        if seen["new"]:  # a new key: findable by its concepts from now on
            self._index(owner, kv_key, concepts(tuple(state["terms"])), kv_user)
        after = self.counts(state["hits"], now)
        if not self.is_hot(after, state["hits"]):
            return None
        refresh = len(state["hits"]) % self.config.refresh_every == 0
        return Detection(self._pattern(kv_key, state, after), not seen["was_hot"], kv_key, state, refresh)

    def _similar(self, owner: str, wanted: frozenset[str]) -> str | None:
        """An earlier key of ``owner`` whose question is a paraphrase of one with ``wanted``
        concepts (the most seen one when several are)."""
        seen: set[str] = set()
        best: tuple[int, str] | None = None
        for concept in wanted:
            entry = self.backend.kv_get(self.index_ns, owner + _SEP + concept)
            for kv_key in (entry or {}).get("keys", []):
                if kv_key in seen:
                    continue
                seen.add(kv_key)
                state = self.backend.kv_get(self.namespace, kv_key)
                if state is None or not paraphrase(wanted, concepts(tuple(state["terms"]))):
                    continue
                if best is None or len(state["hits"]) > best[0]:
                    best = (len(state["hits"]), kv_key)
        return None if best is None else best[1]

    def _index(self, owner: str, kv_key: str, found: frozenset[str], user_id: str | None) -> None:
        # Under its exact concepts: a paraphrase is found through any concept the two share
        # exactly (订单 above); one that shares none is not found (a known limit).
        def add(entry: dict[str, Any] | None) -> dict[str, Any]:
            keys = [k for k in (entry or {}).get("keys", []) if k != kv_key]
            return {"keys": [*keys, kv_key][-_INDEX_KEYS:]}

        for concept in found:
            self.backend.kv_update(self.index_ns, owner + _SEP + concept, add, user_id=user_id)

    def _pattern(self, kv_key: str, state: dict[str, Any], counts: dict[str, int]) -> HotPattern:
        examples = state["examples"]
        return HotPattern(
            key=state["key"], user_id=state["user_id"], intent=Intent(state["intent"]), terms=tuple(state["terms"]),
            query=examples[0]["query"] if examples else "", examples=tuple(e["query"] for e in examples),
            counts=counts, memory_id=self.memory_id(kv_key), answer_id=state.get("answer_id"),
            first_seen=_dt(state["first_seen"]),
            last_seen=_dt(max((h[0] for h in state["hits"]), default=state["first_seen"])))

    # -- the pattern memory -------------------------------------------------------------------
    def publish(self, memory: Any, det: Detection, agent_id: str | None = None) -> HotPattern:
        """Create or update the pattern's memory (with the best known answer) and, when the
        key just became hot, emit ``pattern.detected``. ``memory`` is the BeeWeave.

        While a key stays hot the memory is refreshed (counts, best answer) only every
        ``refresh_every`` sightings: a hot key is by definition seen often, and rewriting
        its memory each time would cost more than the sighting itself.
        """
        from ..events import EventType, MemoryEvent

        p, state = det.pattern, det.state
        exists = bool(memory.backend.contains([p.memory_id]))
        if exists and not (det.became_hot or det.refresh):
            return p
        best_id, answer = self._best_answer(memory, state["examples"])
        content = f"Frequently asked: {p.query}" + (f"\n\n{answer}" if answer else "")
        tags = ["pattern"] + [t for t in (state["examples"][-1].get("tags") or []) if t != "pattern"][:4]
        total = p.counts[max(self.config.windows, key=lambda w: w.span).name]
        meta: dict[str, Any] = {"source": "ingest.pattern", "pattern_key": p.key, "counts": p.counts,
                                "examples": list(p.examples), "answer_id": best_id,
                                "last_seen": p.last_seen.isoformat()}
        fields = dict(tags=tags, weight=float(self.config.weight), intent=p.intent,
                      summary=f"Recurring question (asked {total} times recently): {p.query}"[:300],
                      metadata=meta)
        if exists:
            memory.update(p.memory_id, raw_content=content, **fields)
        else:
            # A pattern memory is admitted like any other (role "pattern"): a source rule or
            # a blocked word holds it for review.
            status, reasons = admit(self.admission, Candidate(content, p.user_id, agent_id, (), None, "pattern"))
            if reasons:
                meta["ingest"] = {"role": "pattern", "review": reasons}
            memory.add(content, user_id=p.user_id, chunk_id=p.memory_id, status=status, **fields)
        if state.get("answer_id") != best_id:
            state["answer_id"] = best_id
            self.backend.kv_put(self.namespace, det.kv_key, state,
                                user_id=None if self.config.scope is PatternScope.GLOBAL else p.user_id)
        p = HotPattern(**{**p.__dict__, "answer_id": best_id})
        if det.became_hot:
            memory.events.emit(MemoryEvent(
                EventType.PATTERN_DETECTED, p.memory_id, p.user_id, agent_id, tuple(tags),
                {"key": p.key, "query": p.query, "counts": p.counts, "examples": list(p.examples),
                 "answer_id": best_id, "intent": p.intent.value}, self.clock()))
        return p

    @staticmethod
    def _best_answer(memory: Any, examples: list[dict[str, Any]]) -> tuple[str | None, str]:
        """The answer of the example whose memory is active and ranks best (weight, confidence,
        then the newest): feedback on answers decides which one a pattern offers."""
        by_id = {e["answer_id"]: e for e in examples if e.get("answer_id") and e.get("answer")}
        if not by_id:
            return None, ""
        order = {e["answer_id"]: i for i, e in enumerate(examples)}  # later examples are newer
        # An answer whose memory was merged lives on in the memory it was merged into (the same
        # question asked again with the same answer is one memory): offer that one.
        live: dict[str, tuple[Any, int, str]] = {}
        moved: dict[str, tuple[int, str]] = {}
        for c in memory.get_many(list(by_id)):
            example = (order[c.id], by_id[c.id]["answer"])
            if c.status.value == "active":
                live[c.id] = (c, *example)
            elif c.status.value == "merged" and isinstance(c.metadata.get("merged_into"), str):
                moved[c.metadata["merged_into"]] = max(moved.get(c.metadata["merged_into"], example), example)
        for c in memory.get_many([i for i in moved if i not in live]):
            if c.status.value == "active":
                live[c.id] = (c, *moved[c.id])
        if not live:
            return None, ""
        best, _, answer = max(live.values(), key=lambda v: (v[0].weight, v[0].confidence, v[0].timestamp, v[1]))
        return best.id, answer

    # -- reading and housekeeping ---------------------------------------------------------------
    def _scan(self, user_id: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        prefix = "" if user_id is None else self.owner(user_id) + _SEP
        return self.backend.kv_scan(self.namespace, prefix)

    # -- a user's data (UserData) ------------------------------------------------------------
    @property
    def keeps(self) -> tuple[str, ...]:
        # Counted across users (GLOBAL), the keys are no user's: forget() takes a user's part out.
        return () if self.config.scope is PatternScope.GLOBAL else (self.namespace, self.index_ns)

    def export_user(self, user_id: str) -> dict[str, Any]:
        """``hot_patterns``: the user's patterns hot now (``HotPattern``, a view: an import
        ignores it); ``patterns``: what they are counted from, ``{"counts": key -> state,
        "concepts": concept -> {"keys": [...]}}``."""
        if not self.keeps:
            return {"hot_patterns": [], "patterns": {}}
        counts = user_entries(self.backend, self.namespace, user_id)
        return {"hot_patterns": [p.to_dict() for p in self.hot(user_id) if p.user_id == user_id],
                "patterns": {"counts": counts, "concepts": user_entries(self.backend, self.index_ns, user_id)}
                if counts else {}}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        patterns = mapping(data.get("patterns") or {}, "patterns")
        if patterns and not self.keeps:
            raise InvalidInputError("the export holds per-user question patterns; this store counts them across "
                                    "users (PatternConfig.scope)")
        parts = {"patterns.counts": patterns.get("counts"), "patterns.concepts": patterns.get("concepts")}
        checks = (("patterns.counts", self.namespace, partial(_pattern_state, user_id)),
                  ("patterns.concepts", self.index_ns, partial(_concept_entry, user_id)))
        return Staged(kv=[replace(e, section="patterns") for name, ns, check in checks
                          for e, _ in named_entries(parts, name, ns, user_id, check)])

    def hot(self, user_id: str | None = None) -> list[HotPattern]:
        """Patterns hot now (by ``clock()``), most-asked first."""
        now = self.clock()
        out = []
        for kv_key, state in self._scan(user_id):
            counts = self.counts(state["hits"], now)
            if self.is_hot(counts, state["hits"]):
                out.append(self._pattern(kv_key, state, counts))
        shortest = min(self.config.windows, key=lambda w: w.span).name
        out.sort(key=lambda p: (-p.counts[shortest], -sum(p.counts.values()), p.key))
        return out

    def forget(self, user_id: str) -> int:
        """Remove a user's sightings and example questions from the shared counts (a user's
        forget: they are the user's words, held where the user's own data is not); a key no
        one else asked goes with its concept index entries. The shared pattern memories
        already published are shared knowledge and stay. Returns how many keys changed."""
        if self.config.scope is not PatternScope.GLOBAL:
            return 0  # per-user state is stored under the user and goes with delete_user
        mark = _user_hash(user_id)
        changed, gone = 0, set()
        for kv_key, state in list(self._scan(None)):
            hits = [h for h in state["hits"] if len(h) < 3 or h[2] != mark]
            examples = [e for e in state["examples"] if e.get("by") != mark]
            if len(hits) == len(state["hits"]) and len(examples) == len(state["examples"]):
                continue
            changed += 1
            if hits:
                self.backend.kv_put(self.namespace, kv_key, {**state, "hits": hits, "examples": examples})
            else:
                self.backend.kv_delete(self.namespace, kv_key)
                gone.add(kv_key)
        self._unindex(gone)
        return changed

    def _unindex(self, gone: set[str]) -> None:
        """Drop keys that no longer exist from the concept index."""
        if not gone:
            return
        for key, entry in list(self.backend.kv_scan(self.index_ns)):
            keys = [k for k in entry.get("keys", []) if k not in gone]
            if not keys:
                self.backend.kv_delete(self.index_ns, key)
            elif len(keys) < len(entry.get("keys", [])):
                owner = key.split(_SEP, 1)[0]
                user = None if self.config.scope is PatternScope.GLOBAL else owner
                self.backend.kv_put(self.index_ns, key, {"keys": keys}, user_id=user)

    def sweep(self) -> int:
        """Forget keys not seen within the longest window; return how many."""
        cutoff = _ts(self.clock() - self._longest)
        stale = [k for k, st in self._scan(None) if not any(h[0] > cutoff for h in st["hits"])]
        for k in stale:
            self.backend.kv_delete(self.namespace, k)
        self._unindex(set(stale))
        return len(stale)

    @property
    def longest(self) -> timedelta:
        return self._longest
