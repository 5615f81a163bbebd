"""Strategies for hostile input, and the check every entry point must pass with them:
it works, or it raises a ``BeeWeaveError`` subclass, and the store stays consistent and
unchanged by a refused call."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from beeweave_core import BeeWeave, BeeWeaveError
from tests.reliability.rel_support import all_chunks
from tests.support import stable_dict

SQL = ["'; DROP TABLE chunks; --", "\" OR 1=1 --", "x'); DELETE FROM edges; --", "%", "_", "%%s", "%(t)s",
       "' UNION SELECT doc FROM chunks --", "robert'); DROP TABLE kv;--", "$1", "?", "\\", "*"]
ODD = ["", " ", "\n\t ", "\x00", "a\x00b", "\ud800", "x\udfffy", "\U0001f600", "用户", "ﬁ", "İ", "\u202e",
       "../../etc/passwd", "..\\..\\boot.ini", "%2e%2e%2f", "a" * 300, "\x1f", "\x7f", "NaN", "null", "[]", "{}"]

# Every code point, with lone surrogates and NUL added (hypothesis's text never holds surrogates).
any_char = st.one_of(st.characters(), st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\x00"]))


def text_of(chars: st.SearchStrategy = any_char, *, min_size: int = 0, max_size: int = 40) -> st.SearchStrategy:
    return st.lists(chars, min_size=min_size, max_size=max_size).map("".join)


texts = st.one_of(text_of(), st.sampled_from(SQL + ODD),
                  st.builds(lambda a, b: a + b, st.sampled_from(SQL + ODD), text_of(max_size=10)))
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), texts, st.binary(max_size=8))
junk = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(texts, inner, max_size=4),
                                                     st.tuples(inner, inner), st.frozensets(st.integers(), max_size=3)),
                    max_leaves=12)
# Plausible values now and then, so that calls get past the first check.
words = st.sampled_from(["alice", "bob", "deploy", "kubernetes", "coffee", "python memory", "s1", "s2", "x", "y"])


def maybe(valid: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(valid, valid, junk)


def nested(depth: int, leaf: Any = 1) -> Any:
    """A dict nested ``depth`` deep, built without recursion."""
    out: Any = leaf
    for _ in range(depth):
        out = {"k": out}
    return out


def snapshot(m: BeeWeave) -> str:
    return json.dumps(sorted(json.dumps(stable_dict(c), sort_keys=True) for c in all_chunks(m.backend).values()))


def works_or_refuses(m: BeeWeave, call: Callable[[], Any], *, changes_nothing_on_error: bool = True) -> bool:
    """Run ``call``: True if it worked, False if it raised a ``BeeWeaveError`` (then the store
    must be as it was). Any other exception fails the test."""
    if changes_nothing_on_error:
        # Earlier calls on this (module-wide) store may have queued events; let the worker store
        # them first, or one landing during ``call`` would look like the refused call's doing.
        assert m.flush(30)
    before = snapshot(m) if changes_nothing_on_error else None
    try:
        call()
        return True
    except BeeWeaveError:
        if before is not None:
            assert snapshot(m) == before, "a refused call changed the store"
        return False
