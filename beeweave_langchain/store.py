"""``BeeWeaveStore``: a LangGraph ``BaseStore`` whose items are BeeWeave memories.

Each item ``(namespace, key) -> value`` is one memory. Its id is derived from the
namespace and the key (so ``get`` is a lookup by id), its content is the text LangGraph
would index (the whole value as JSON, or the ``index`` fields), and the value itself, the
namespace, the key and both timestamps are kept as JSON in the memory's metadata under
``"langgraph"``, so nothing of the item is lost whatever the text looks like.

An item is an application's record under its own key, not a memory the engine curates: it
is stored as given (no redaction unless ``redact=True``, never held for review), pinned
(decay, tiers and capacity eviction leave it alone) and of ``kind="item"`` (maintenance
never merges it with another memory). Only a delete or its TTL removes it.

Namespaces map to BeeWeave scopes (``user_level``, ``agent_level``, ``session_level``
choose which namespace labels are the user, agent and session) and every prefix of the
namespace is a tag, so prefix searches are exact filters inside BeeWeave's retrieval.
A search with a ``query`` is BeeWeave's hybrid (BM25 + vector) search; without one it
lists the prefix's items oldest first. ``filter`` applies LangGraph's operators to the
stored values.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from beeweave_core.errors import DuplicateIdError, InvalidInputError, NotFoundError, StoreClosedError
from beeweave_core.filters import build_filter
from beeweave_core.records import ChunkStatus, KnowledgeChunk
from beeweave_core.scopes import Scopes
from beeweave_core.validation import check_json, check_number

logger = logging.getLogger(__name__)

__all__ = ["BeeWeaveStore", "NAMESPACE_TAG", "item_id"]

NAMESPACE_TAG = "langgraph.ns:"  # + the JSON list of a namespace prefix, one tag per prefix
_META = "langgraph"  # the metadata key holding the item
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def item_id(namespace: Sequence[str], key: str) -> str:
    """The memory id of the item ``key`` in ``namespace`` (the same in every process)."""
    digest = hashlib.sha256(json.dumps([list(namespace), key], ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return "lg_" + digest.hexdigest()[:32]


def item_of(chunk: KnowledgeChunk) -> dict[str, Any] | None:
    """The LangGraph item a memory holds (namespace, key, value, timestamps), or None for a
    memory that is not a ``BeeWeaveStore`` item. The one reader of the item's layout: the
    store and the middleware's recall both use it."""
    data = chunk.metadata.get(_META)
    return data if isinstance(data, dict) and "key" in data else None


def _prefix_tag(prefix: Sequence[str]) -> str:
    return NAMESPACE_TAG + json.dumps(list(prefix), ensure_ascii=False, separators=(",", ":"))


# The longest TTL a put takes: an expiry a thousand years out stays inside the calendar for
# every refresh until the year 9000 (datetime ends in 9999; 1e10 minutes overflowed it).
MAX_TTL_MINUTES = 1000 * 525_960


def _expiry(now: datetime, ttl: float) -> datetime:
    """When an item put or read at ``now`` with ``ttl`` minutes expires (the end of the
    calendar at the latest: a stored TTL is never refused on a later read)."""
    try:
        return now + timedelta(minutes=ttl)
    except OverflowError:
        return datetime.max.replace(tzinfo=timezone.utc)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


# -- LangGraph's filter language on stored values -----------------------------------------
def _check_filter(flt: Mapping[str, Any] | None) -> None:
    """Refuse an operator LangGraph does not define before any work is done."""
    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if isinstance(k, str) and k.startswith("$") and k not in _OPERATORS:
                    raise InvalidInputError(f"unsupported filter operator {k!r}; LangGraph defines {', '.join(_OPERATORS)}")
                walk(v)

    if flt is not None and not isinstance(flt, Mapping):
        raise InvalidInputError(f"filter must be a dict, got {type(flt).__name__}")
    walk(flt or {})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        out = float(value)
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def _apply(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    a, b = _number(value), _number(arg)
    if a is None or b is None:  # a missing or non-numeric value matches no comparison
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _compare(value: Any, want: Any) -> bool:
    if isinstance(want, tuple):  # values are stored as JSON, where a tuple is a list
        want = list(want)
    if isinstance(want, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(_apply(value, op, arg) for op, arg in want.items())
        return isinstance(value, Mapping) and all(_compare(value.get(k), v) for k, v in want.items())
    return bool(value == want)


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    return not flt or all(_compare(value.get(k), v) for k, v in flt.items())


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, labels, strict=True))


def _tokenized(fields: Iterable[str]) -> list[tuple[str, str | list[str]]]:
    # As LangGraph's own stores do: "$" (the whole value) stays a string, other paths are tokenised.
    return [(f, "$" if f == "$" else tokenize_path(f)) for f in fields]


def _validate_namespace(namespace: Any, *, allow_empty: bool = False) -> tuple[str, ...]:
    if not isinstance(namespace, tuple):
        raise InvalidInputError(f"a namespace is a tuple of strings, got {type(namespace).__name__}")
    if not namespace and not allow_empty:
        raise InvalidInputError("a namespace cannot be empty")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidInputError(f"namespace labels are non-empty strings without '.' or NUL; got {label!r}")
    return namespace


class BeeWeaveStore(BaseStore):
    """A LangGraph store over a BeeWeave memory: hybrid search, exact namespaces, TTLs.

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[langchain]"

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_langchain import BeeWeaveStore

            store = BeeWeaveStore(BeeWeave("memory.db"))
            agent = create_agent(model, tools, store=store)  # tools read runtime.store

    Usage:
        .. code-block:: python

            store.put(("memories", "alice"), "diet", {"text": "Alice is vegetarian", "since": 2019})
            store.search(("memories", "alice"), query="what does alice eat", filter={"since": {"$lt": 2020}})

    Namespaces and scopes: ``namespace[user_level]`` is the memory's user (``default_user``
    when the namespace is shorter), ``namespace[agent_level]`` its agent and
    ``namespace[session_level]`` its session when those levels are set; every prefix of the
    namespace is a tag ``langgraph.ns:["memories","alice"]``. With the defaults,
    ``("memories", "alice", "prefs")`` is a memory of user ``alice`` tagged with its four
    prefixes (``[]`` included). A search whose prefix reaches the user level is scoped
    to that user; a shorter prefix searches every user's items under it.

    Indexing: the memory's text is what LangGraph would embed: the whole value as JSON
    by default, or the fields of ``index={"fields": [...]}`` (paths as LangGraph writes
    them), or those of ``put(..., index=[...])``. ``put(..., index=False)`` stores an item
    that listings and filters find but query searches do not. BeeWeave embeds with its own
    model: an ``index`` with ``embed`` is refused (give the model to ``BeeWeave(embedder=...)``)
    and ``dims`` must be that model's dimension.

    Items are kept as put: ``get`` returns the value that was put. They are pinned and of
    ``kind="item"``, so BeeWeave's lifecycle (decay, tiers, eviction, merging near-duplicates
    in ``maintain()``) never changes or hides one; only ``delete`` or its TTL removes it.
    ``redact=True`` applies the memory's redaction of personal data and secrets to items as
    they are written (the value and the indexed text): ``get`` then returns the redacted
    value.

    TTL: ``put(..., ttl=minutes)`` sets the memory's ``expires_at``; an expired item is
    absent from every read, reading refreshes the TTL (``refresh_ttl`` / ``ttl_config``),
    and ``sweep()`` deletes expired items.

    Values must be JSON (they are stored as JSON in the memory's metadata). ``abatch``
    runs the engine in a worker thread, so the event loop is never blocked.

    Args:
        memory: a local BeeWeave (SQLite or PostgreSQL backend): listings and
            ``list_namespaces`` scan its backend, so a remote ``BeeWeaveClient`` will not do.
        user_level, agent_level, session_level: namespace positions of the scopes.
        default_user: the user of items whose namespace has no user level.
        index: LangGraph's index configuration (``fields``; ``dims`` checked).
        ttl: LangGraph's TTL configuration (``default_ttl`` minutes, ``refresh_on_read``;
            ``sweep_interval_minutes`` starts a daemon thread that calls ``sweep()`` that often
            until the memory closes or ``stop_ttl_sweeper()``).
        redact: redact personal data and secrets in items as they are written (off: a
            store returns what was put).
        abstain_below: a query search returns no items when none reaches this calibrated
            relevance (None: the store's default gate, ``SearchConfig.abstain_below``;
            ``abstain_below=0`` turns any gate off).
        scopes: the shared scopes a read of a user's namespace covers too, as ``BeeWeave.search``
            takes them (None: the store's default, the user, the tenant and the scopes granted
            to the user): ``("memories", "alice")`` then also reads ``("memories", "scope:tenant")``.

    Scores: a query search's ``SearchItem.score`` is the item's calibrated relevance in [0, 1]
    (``SearchHit.relevance``: comparable across searches, 0.5 is no midpoint of a ranking),
    None for a listing without a query.
    """

    supports_ttl: bool = True

    def __init__(self, memory: Any, *, user_level: int | None = 1, agent_level: int | None = None,
                 session_level: int | None = None, default_user: str = "langgraph",
                 index: IndexConfig | None = None, ttl: TTLConfig | None = None, redact: bool = False,
                 abstain_below: float | None = None, scopes: Sequence[str] | None = None) -> None:
        levels = [lv for lv in (user_level, agent_level, session_level) if lv is not None]
        if any(not isinstance(lv, int) or isinstance(lv, bool) or lv < 0 for lv in levels):
            raise InvalidInputError("user_level, agent_level and session_level are non-negative integers or None")
        if len(set(levels)) != len(levels):
            raise InvalidInputError("user_level, agent_level and session_level must be different positions")
        if not isinstance(default_user, str) or not default_user.strip():
            raise InvalidInputError("default_user must be a non-empty string")
        self.memory = memory
        self.user_level, self.agent_level, self.session_level = user_level, agent_level, session_level
        self.default_user = default_user
        self.index_config = self._check_index(index)
        self._fields = _tokenized((self.index_config or {}).get("fields") or ["$"])
        if ttl is not None and not isinstance(ttl, Mapping):
            raise InvalidInputError("ttl must be a TTLConfig dict")
        if not isinstance(redact, bool):
            raise InvalidInputError("redact must be True or False")
        if abstain_below is not None:
            check_number("abstain_below", abstain_below, low=0.0, high=1.0)
        self.ttl_config = ttl
        self.redact = redact
        self.abstain_below = abstain_below
        self.scopes = None if scopes is None else list(scopes)
        self._sweeper: threading.Thread | None = None
        self._stop_sweeping = threading.Event()
        interval = (ttl or {}).get("sweep_interval_minutes")
        if interval is not None:
            if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0:
                raise InvalidInputError(f"sweep_interval_minutes is a positive number, got {interval!r}")
            self._sweeper = threading.Thread(target=self._sweep_every, args=(float(interval) * 60,),
                                             name="beeweave-ttl-sweeper", daemon=True)
            self._sweeper.start()

    def _sweep_every(self, seconds: float) -> None:
        while not self._stop_sweeping.wait(seconds):
            try:
                self.sweep()
            except StoreClosedError:
                return
            except Exception:  # a store briefly unavailable: the next sweep deletes them
                logger.warning("BeeWeave store: the TTL sweep failed; trying again in %s s", seconds, exc_info=True)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread ``sweep_interval_minutes`` started; True once it stopped."""
        self._stop_sweeping.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout)
            return not self._sweeper.is_alive()
        return True

    def _check_index(self, index: IndexConfig | None) -> IndexConfig | None:
        if index is None:
            return None
        if not isinstance(index, Mapping):
            raise InvalidInputError("index must be a dict (LangGraph's IndexConfig)")
        unknown = set(index) - {"fields", "dims", "embed"}
        if unknown:
            raise InvalidInputError(f"unknown index settings {sorted(unknown)}")
        if index.get("embed") is not None:
            raise InvalidInputError("BeeWeaveStore embeds with the BeeWeave store's model: give your embeddings to "
                                    "BeeWeave(embedder=...) (e.g. LangChainEmbedder) instead of index['embed']")
        dims = index.get("dims")
        if dims is not None:
            own = self.memory.dim or self.memory.embedder.dim
            if dims != own:
                raise InvalidInputError(f"index dims {dims} differ from the BeeWeave model's dimension {own}")
        fields = index.get("fields")
        if fields is not None and (isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields)):
            raise InvalidInputError("index['fields'] is a list of paths such as ['text', 'notes[*].body']")
        return index

    def _now(self) -> datetime:
        # The engine's clock when it has one (tests control it), so expiry agrees with its scoring.
        clock = getattr(self.memory, "clock", None)
        return clock() if callable(clock) else _utcnow()

    # -- the mapping ----------------------------------------------------------------------
    def _label(self, namespace: tuple[str, ...], level: int | None) -> str | None:
        return namespace[level] if level is not None and len(namespace) > level else None

    def _user_of(self, namespace: tuple[str, ...]) -> str:
        return self._label(namespace, self.user_level) or self.default_user

    def _text(self, value: Mapping[str, Any], index: list[str] | None) -> str:
        fields = self._fields if index is None else _tokenized(index)
        texts = [t for _, path in fields for t in get_text_at_path(value, path) if t.strip()]
        return "\n".join(texts)

    def _record(self, op: PutOp, now: datetime, created: datetime | None) -> dict[str, Any]:
        """The memory for a put: text to index, scope, tags and the item itself in metadata."""
        value = op.value
        if not isinstance(value, Mapping):
            raise InvalidInputError(f"an item's value is a dict, got {type(value).__name__}")
        if op.index is not None and op.index is not False and (
                isinstance(op.index, str) or not all(isinstance(f, str) for f in op.index)):
            raise InvalidInputError("index is False, None or a list of field paths")
        ttl = self._ttl(op.ttl)
        value = dict(value)
        indexed = op.index is not False
        ns = op.namespace
        item = {"namespace": list(ns), "key": op.key, "value": value, "indexed": indexed, "ttl": ttl,
                "created_at": (created or now).isoformat(), "updated_at": now.isoformat()}
        # The engine's own check of what it will store (the value sits two levels down in the
        # metadata): finite numbers, string keys, valid Unicode, not nested too deeply for JSON.
        check_json("value", {_META: item, "kind": "item"})
        text = self._text(value, op.index or None) if indexed else ""
        return dict(
            # An item with nothing to index still needs a text: its key, or its namespace for the
            # empty key LangGraph allows (query searches skip it).
            content=text or op.key or "/".join(ns), user_id=self._user_of(ns), agent_id=self._label(ns, self.agent_level),
            session_id=self._label(ns, self.session_level), chunk_id=item_id(ns, op.key),
            tags=[_prefix_tag(ns[:n]) for n in range(len(ns) + 1)], metadata={_META: item, "kind": "item"},
            expires_at=_expiry(now, ttl) if ttl is not None else None, pinned=True,
            # An explicit status: admission never holds an item for review (a put is readable).
            status=ChunkStatus.ACTIVE)

    def _ttl(self, ttl: Any) -> float | None:
        if ttl is None:
            return None
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
            raise InvalidInputError(f"ttl is a positive number of minutes, got {ttl!r}")
        if ttl > MAX_TTL_MINUTES:  # an expiry past the calendar (datetime ends in 9999)
            raise InvalidInputError(f"ttl is at most {MAX_TTL_MINUTES} minutes (1,000 years), got {ttl!r}")
        return float(ttl)

    @staticmethod
    def _expired(chunk: KnowledgeChunk, now: datetime) -> bool:
        return chunk.expires_at is not None and chunk.expires_at <= now

    @staticmethod
    def _item_fields(data: Mapping[str, Any]) -> dict[str, Any]:
        return dict(namespace=tuple(data["namespace"]), key=data["key"], value=dict(data["value"]),
                    created_at=datetime.fromisoformat(data["created_at"]),
                    updated_at=datetime.fromisoformat(data["updated_at"]))

    def _refresh(self, chunks: Iterable[KnowledgeChunk], now: datetime) -> None:
        """Move the expiry of read items that have a TTL (LangGraph's refresh on read)."""
        for c in chunks:
            data = item_of(c)
            if data is not None and data.get("ttl"):
                try:
                    self.memory.update(c.id, expires_at=_expiry(now, data["ttl"]))
                except NotFoundError:
                    pass  # deleted since it was read: nothing left to keep alive

    # -- operations ---------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order (a get after a put of the same batch sees the put);
        consecutive puts are written together (one embedding batch)."""
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        i = 0
        while i < len(ops):
            op = ops[i]
            if isinstance(op, PutOp):
                j = i
                while j < len(ops) and isinstance(ops[j], PutOp):
                    j += 1
                self._put([o for o in ops[i:j] if isinstance(o, PutOp)])
                i = j
                continue
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
            i += 1
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The engine is synchronous (SQLite or PostgreSQL, FAISS, the embedder): a worker thread.
        return await asyncio.to_thread(self.batch, list(ops))

    def _get(self, op: GetOp) -> Item | None:
        ns = _validate_namespace(op.namespace)
        found = self.memory.get_many([item_id(ns, str(op.key))])
        now = self._now()
        if not found or self._expired(found[0], now) or (data := item_of(found[0])) is None:
            return None
        if op.refresh_ttl:
            self._refresh(found, now)
        return Item(**self._item_fields(data))

    def _put(self, ops: list[PutOp]) -> None:
        last: dict[str, PutOp] = {}
        for op in ops:  # validate all before writing any; the last put of a key wins
            _validate_namespace(op.namespace)
            if not isinstance(op.key, str):  # "" is a key, as in LangGraph's own stores
                raise InvalidInputError("an item's key is a string")
            if op.value is not None:
                self._record(op, self._now(), None)
            last[item_id(op.namespace, op.key)] = op
        gone = [cid for cid, op in last.items() if op.value is None]
        if gone:
            self.memory.delete_many(gone)
        writes = {cid: op for cid, op in last.items() if op.value is not None}
        if not writes:
            return
        now = self._now()
        existing = {c.id: c for c in self.memory.get_many(list(writes))}
        new = [self._record(op, now, None) for cid, op in writes.items() if cid not in existing]
        trusted = not self.redact  # redaction only: the explicit status keeps admission out
        try:
            if new:
                self.memory.add_many(new, show_progress=False, trusted=trusted)
        except DuplicateIdError:  # another writer added some of them meanwhile: update those instead
            for record in new:
                try:
                    self.memory.add_many([record], show_progress=False, trusted=trusted)
                except DuplicateIdError:
                    existing[record["chunk_id"]] = self.memory.get(record["chunk_id"])
        for cid, chunk in existing.items():
            data = item_of(chunk)
            expired = self._expired(chunk, now)
            created = datetime.fromisoformat(data["created_at"]) if data and not expired else None
            record = self._record(writes[cid], now, created)
            # A put makes the key a live item again, whatever an older version or a person did
            # to the memory meanwhile (archived it, unpinned it, or maintenance merged it).
            # A put replaces the value (as LangGraph's stores do): no version history per item.
            try:
                self.memory.update(cid, trusted=trusted, versioned=False, content=record["content"],
                                   metadata={**chunk.metadata, **record["metadata"]}, tags=record["tags"],
                                   expires_at=record["expires_at"], agent_id=record["agent_id"],
                                   session_id=record["session_id"], pinned=record["pinned"], status=record["status"])
            except NotFoundError:  # deleted since it was read (a TTL sweep, a delete): put it anew
                self.memory.add_many([self._record(writes[cid], now, None)], show_progress=False, trusted=trusted)

    def _scope(self, prefix: tuple[str, ...]) -> tuple[list[str] | None, dict[str, Any]]:
        """The owners a read of ``prefix`` covers and its filter. A prefix that names a user
        reads the same namespace of the shared scopes that user reads too (``scopes``, the
        store's default): ``("memories", "alice")`` also finds ``("memories", "scope:tenant")``."""
        user = self._label(prefix, self.user_level)
        if user is None or self.user_level is None:
            return None, {"tags_all": [_prefix_tag(prefix)]}
        owners = Scopes(getattr(self.memory, "scope_config", None)).owners(user, self.scopes)
        level = self.user_level
        return owners, {"tags_any": [_prefix_tag((*prefix[:level], o, *prefix[level + 1:])) for o in owners]}

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = _validate_namespace(tuple(op.namespace_prefix), allow_empty=True)
        _check_filter(op.filter)
        for name in ("limit", "offset"):
            v = getattr(op, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InvalidInputError(f"{name} must be a non-negative integer, got {v!r}")
        if op.limit == 0:
            return []
        now = self._now()
        found: list[tuple[KnowledgeChunk, dict[str, Any], float | None]] = []
        if op.query is not None and op.query.strip():
            found = self._query(op, prefix, now)
        else:
            for c in self._scan(prefix):
                data = item_of(c)
                if data is not None and not self._expired(c, now) and _matches(data["value"], op.filter):
                    found.append((c, data, None))
                    if len(found) >= op.offset + op.limit:
                        break
        page = found[op.offset: op.offset + op.limit]
        if op.refresh_ttl:
            self._refresh([c for c, _, _ in page], now)
        return [SearchItem(**self._item_fields(data), score=score) for _, data, score in page]

    def _query(self, op: SearchOp, prefix: tuple[str, ...], now: datetime,
               ) -> list[tuple[KnowledgeChunk, dict[str, Any], float | None]]:
        """Hybrid search; the value filter is applied to the hits, so ask for more until enough match."""
        user, flt = self._scope(prefix)
        need = op.offset + op.limit
        k = need
        while True:
            hits = self.memory.search(op.query, k=k, filters={**flt, "user_id": user} if user else flt,
                                      abstain_below=self.abstain_below)
            found: list[tuple[KnowledgeChunk, dict[str, Any], float | None]] = []
            for h in hits:
                data = item_of(h.chunk)
                if data is not None and data.get("indexed", True) and not self._expired(h.chunk, now) \
                        and _matches(data["value"], op.filter):
                    found.append((h.chunk, data, None if h.relevance is None else float(h.relevance)))
            if len(found) >= need or len(hits) < k:
                return found
            k *= 4

    def _scan(self, prefix: tuple[str, ...]) -> Iterator[KnowledgeChunk]:
        user, flt = self._scope(prefix)
        return iter(self.memory.backend.scan(build_filter(flt, user_id=user), order="timestamp"))

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        for c in conditions:
            if c.match_type not in ("prefix", "suffix"):
                raise InvalidInputError(f"match_type must be 'prefix' or 'suffix', got {c.match_type!r}")
        if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 0):
            raise InvalidInputError("max_depth must be a non-negative integer")
        # The fixed head of a prefix condition narrows the scan to its tag.
        head: tuple[str, ...] = ()
        for c in conditions:
            if c.match_type == "prefix":
                fixed = []
                for label in c.path:
                    if label == "*":
                        break
                    fixed.append(label)
                head = max(head, tuple(fixed), key=len)
        now = self._now()
        seen: set[tuple[str, ...]] = set()
        for chunk in self._scan(head):
            data = item_of(chunk)
            if data is None or self._expired(chunk, now):
                continue
            ns = tuple(data["namespace"])
            if all(_namespace_matches(c, ns) for c in conditions):
                seen.add(ns if op.max_depth is None else ns[: op.max_depth])
        return sorted(seen)[op.offset: op.offset + op.limit]

    def sweep(self) -> int:
        """Delete the expired items; returns how many were deleted. Each is judged again as the
        delete reads it: an item put or read (its TTL refreshed) since the scan stays."""
        now = self._now()
        expired = [c.id for c in self._scan(()) if self._expired(c, now) and item_of(c) is not None]
        if not expired:
            return 0
        return len(self.memory.delete_many(
            expired, only_if=lambda c: self._expired(c, now) and item_of(c) is not None))
