"""The rules a configuration's fields follow, declared as a table and checked in one place.

Each configuration class (``SearchConfig``, ``LifecycleConfig``, ``ServerConfig``...) names its
fields' rules in a ``RULES`` table and calls :func:`check_fields` from ``__post_init__``, so
a range or a choice is written once, every class reports a bad value the same way
(``LifecycleConfig.merge_threshold must be a number in [-1, 1], got 2``), and a bad value
raises :class:`InvalidInputError` before anything is built with it. A class keeps hand-written
checks only for what a table cannot say (regular expressions, a summarizer's methods).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import Any, Protocol

from .errors import InvalidInputError

__all__ = ["Rule", "Number", "Is", "FLAG", "TEXT", "Choice", "Duration", "Instance", "Items", "check_fields", "TRUE_WORDS",
           "FALSE_WORDS", "truth"]

# The words a switch given as text (an environment variable, a URL parameter) may be, in any case.
TRUE_WORDS, FALSE_WORDS = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


def truth(text: str) -> bool | None:
    """``text`` as a switch: True, False, or None when it is neither word list's."""
    word = text.strip().lower()
    return True if word in TRUE_WORDS else False if word in FALSE_WORDS else None


class Rule(Protocol):
    """A field's rule: ``check`` returns the value to keep or raises; ``text`` is what it asks for,
    as the end of "X must be ..."."""

    def check(self, name: str, value: Any, config: Any) -> Any: ...

    def text(self) -> str: ...


def _fail(name: str, rule: Rule, value: Any) -> InvalidInputError:
    return InvalidInputError(f"{name} must be {rule.text()}, got {value!r}")


def _num(x: float) -> str:
    """A bound as a reader writes it: 1000000, not 1e+06; 0.5 as 0.5."""
    return str(int(x)) if float(x).is_integer() else repr(x)


def _bound(bound: float | str | None, config: Any) -> float | None:
    # a bound may name another field of the same configuration (max_weight >= min_weight)
    return getattr(config, bound) if isinstance(bound, str) else bound


@dataclass(frozen=True)
class Number:
    """A finite number (never a bool) within ``[low, high]``; ``open_low`` excludes ``low``.

    ``integer`` asks for an ``int``; ``optional`` also accepts ``None``. A bound given as a
    string is the value of that field of the same configuration.
    """

    low: float | str | None = None
    high: float | str | None = None
    open_low: bool = False
    integer: bool = False
    optional: bool = False

    def check(self, name: str, value: Any, config: Any) -> Any:
        if value is None and self.optional:
            return value
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or (self.integer and not isinstance(value, int))):
            raise _fail(name, self, value)
        low, high = _bound(self.low, config), _bound(self.high, config)
        if ((low is not None and (value <= low if self.open_low else value < low))
                or (high is not None and value > high)):
            raise InvalidInputError(f"{name} must be {self._text(low, high)}, got {value!r}")
        return value

    def _text(self, low: Any, high: Any) -> str:
        noun = "an integer" if self.integer else "a number"
        if low is not None and high is not None:
            out = f"{noun} in {'(' if self.open_low else '['}{_num(low)}, {_num(high)}]"
        elif low is not None:
            out = f"{noun} {'>' if self.open_low else '>='} {_num(low)}"
        elif high is not None:
            out = f"{noun} <= {_num(high)}"
        else:
            out = "an integer" if self.integer else "a finite number"
        return out + (" or None" if self.optional else "")

    def text(self) -> str:
        low, high = (None if isinstance(b, str) else b for b in (self.low, self.high))
        return self._text(low, high)


@dataclass(frozen=True)
class Is:
    """A value ``test`` accepts, kept as given; ``what`` says what it must be."""

    test: Callable[[Any], bool]
    what: str

    def check(self, name: str, value: Any, config: Any) -> Any:
        if not self.test(value):
            raise _fail(name, self, value)
        return value

    def text(self) -> str:
        return self.what


FLAG = Is(lambda v: isinstance(v, bool), "True or False")  # not merely truthy
TEXT = Is(lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string")


@dataclass(frozen=True)
class Choice:
    """A member of a ``str`` enum, given as the member or its value (kept as the member), or
    one of a tuple of strings."""

    among: type[Enum] | tuple[str, ...]
    optional: bool = False

    def check(self, name: str, value: Any, config: Any) -> Any:
        if value is None and self.optional:
            return value
        if isinstance(self.among, tuple):
            if value not in self.among:
                raise _fail(name, self, value)
            return value
        try:
            return self.among(value)
        except ValueError:
            raise _fail(name, self, value) from None

    def text(self) -> str:
        names = self.among if isinstance(self.among, tuple) else tuple(m.value for m in self.among)
        return "one of " + ", ".join(repr(n) for n in names) + (" or None" if self.optional else "")


@dataclass(frozen=True)
class Duration:
    """A positive ``timedelta`` (``optional``: or ``None``)."""

    optional: bool = False

    def check(self, name: str, value: Any, config: Any) -> Any:
        if value is None and self.optional:
            return value
        if not isinstance(value, timedelta) or value <= timedelta(0):
            raise _fail(name, self, value)
        return value

    def text(self) -> str:
        return "a positive timedelta" + (" or None" if self.optional else "")


@dataclass(frozen=True)
class Instance:
    """An instance of ``cls`` (``optional``: or ``None``); ``convert`` first turns other input into one."""

    cls: type | tuple[type, ...]
    what: str
    optional: bool = False
    convert: Callable[[Any], Any] | None = None

    def check(self, name: str, value: Any, config: Any) -> Any:
        if value is None and self.optional:
            return value
        if self.convert is not None and not isinstance(value, self.cls):
            value = self.convert(value)
        if not isinstance(value, self.cls):
            raise _fail(name, self, value)
        return value

    def text(self) -> str:
        return self.what + (" or None" if self.optional else "")


@dataclass(frozen=True)
class Items:
    """A list or tuple (not a string, not a mapping) whose every item follows ``item``; kept as a tuple."""

    item: Rule
    optional: bool = False

    def check(self, name: str, value: Any, config: Any) -> Any:
        if value is None and self.optional:
            return value
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            raise _fail(name, self, value)
        return tuple(self.item.check(f"{name}[{i}]", v, config) for i, v in enumerate(value))

    def text(self) -> str:
        return f"a list, each {self.item.text()}" + (" (or None)" if self.optional else "")


def check_fields(config: Any, rules: Mapping[str, Rule]) -> None:
    """Check ``config``'s fields named in ``rules``, in order, keeping what each rule returns
    (an enum member for its value); a frozen dataclass is set through ``object.__setattr__``."""
    owner = type(config).__name__
    for name, rule in rules.items():
        value = getattr(config, name)
        kept = rule.check(f"{owner}.{name}", value, config)
        if kept is not value:
            object.__setattr__(config, name, kept)

