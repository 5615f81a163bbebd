"""PII redaction: personal data and secrets are replaced before anything is stored or
embedded.

Each built-in rule is a regular expression plus, where a shape alone would catch too
much, a validator: bank cards must pass the Luhn check, a Chinese 18-digit ID its
ISO 7064 MOD 11-2 check digit and a real birth date, an IP address must parse. So
near-misses (a 16-digit number failing Luhn, an 18-digit number with a wrong check
digit, ``v1.2.3.4`` or ``version 1.2.3.4``) are left alone. Numbers are also found written
in groups (``110105 19491231 002X``, ``0755-8765 4321``, ``(021) 5555 1234``); groups
separated by spaces only count standing alone, not inside a longer run of numbers.

Rules run in a fixed order (custom patterns, then secrets, e-mail, national IDs, bank
cards, phones, IP addresses) so that ``password=13812345678`` is one secret, not a
phone. A replacement names the kind (``[EMAIL]``, ``[PHONE]``...). Inside a JSON
document a bare number is replaced by a quoted token so the JSON still parses.
"""

from __future__ import annotations

import bisect
import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from enum import Enum
from typing import Any

from ..errors import InvalidInputError
from ..tokenizer import WIDTH_FOLD

__all__ = ["PiiKind", "PiiPattern", "Redactor", "luhn_valid", "cn_id_valid", "shannon_entropy"]


class PiiKind(str, Enum):
    SECRET = "secret"
    EMAIL = "email"
    NATIONAL_ID = "national_id"
    BANK_CARD = "bank_card"
    PHONE = "phone"
    IP_ADDRESS = "ip_address"


_TOKEN = {PiiKind.SECRET: "[SECRET]", PiiKind.EMAIL: "[EMAIL]", PiiKind.NATIONAL_ID: "[ID]",
          PiiKind.BANK_CARD: "[CARD]", PiiKind.PHONE: "[PHONE]", PiiKind.IP_ADDRESS: "[IP]"}


@dataclass(frozen=True)
class PiiPattern:
    """A custom redaction rule.

    Args:
        name: what is redacted (the default replacement is ``[NAME]`` upper-cased).
        pattern: a regular expression (string or compiled).
        replacement: the text that replaces a match.
        validate: called with the matched text; a match is redacted only if it returns True.
    """

    name: str
    pattern: str | re.Pattern[str]
    replacement: str | None = None
    validate: Callable[[str], bool] | None = None


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check of payment card numbers; ``digits`` holds only digits."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


_CN_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_CHECK = "10X98765432"
# First two digits: the province-level region (GB/T 2260).
_CN_REGIONS = frozenset("11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 50 51 52 53 54 "
                        "61 62 63 64 65 71 81 82 83 91".split())


def cn_id_valid(number: str) -> bool:
    """A Chinese resident ID (18 characters): region, birth date and the ISO 7064 MOD 11-2 check digit."""
    if len(number) != 18 or not number[:17].isdigit() or number[:2] not in _CN_REGIONS:
        return False
    try:
        born = date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    if not 1900 <= born.year <= 2100:
        return False
    check = _CN_CHECK[sum(int(c) * w for c, w in zip(number, _CN_WEIGHTS)) % 11]
    return number[17].upper() == check


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``'s own character distribution."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def _ssn_valid(m: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", m.group(0))  # 078-05-1120 or 078 05 1120
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and not area.startswith("9") and group != "00" and serial != "0000"


def _card_valid(m: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", m.group(0))
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


def _digit_count(lo: int, hi: int) -> Callable[[re.Match[str]], bool]:
    """Digits of the number itself (group ``num``): an extension after it does not count."""
    return lambda m: lo <= sum(ch.isdigit() for ch in m.group("num")) <= hi


_VERSION_BEFORE = re.compile(r"(?i)(?:(?<![A-Za-z])(?:version|ver\.?|release|rev\.?|build)|版本号?)\s*[:：=]?\s*$")


def _ipv4_valid(m: re.Match[str]) -> bool:
    return not _VERSION_BEFORE.search(m.string, max(0, m.start() - 16), m.start())


def _ipv6_valid(m: re.Match[str]) -> bool:
    text = m.group(0)
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    groups = [g for g in text.split(":") if g]
    # "a::b" in prose or code is more likely a name than an address.
    return len(groups) >= 3 or sum(len(g) for g in groups) >= 4


def _high_entropy(m: re.Match[str]) -> bool:
    token = m.group(0)
    if not (re.search(r"[a-z]", token) and re.search(r"[A-Z]", token) and re.search(r"\d", token)):
        return False  # hex digests and UUIDs stay: they name things more often than they unlock them
    runs = re.findall(r"[a-z]+", token)
    if sum(map(len, runs)) / len(runs) >= 3.0:
        return False  # made of words: a long identifier such as ThisIsAVeryLongClassName2
    return shannon_entropy(token) >= 4.0


def _not_already_redacted(m: re.Match[str]) -> bool:
    value = m.group("value").strip("\"'")
    return not (value.startswith("[") and value.endswith("]"))


class _Scope(str, Enum):
    ALL = "all"  # the whole text
    NUMBERS = "numbers"  # only around runs of digits (cheap to find; most text has few)
    ANCHORS = "anchors"  # only where one of ``anchors`` starts (case-insensitive)


@dataclass(frozen=True)
class _Rule:
    kind: str
    token: str
    regex: re.Pattern[str]
    check: Callable[[re.Match[str]], bool] | None = None
    hints: tuple[str, ...] = ()  # the rule runs only if one of these substrings occurs
    scope: _Scope = _Scope.ALL
    anchors: tuple[str, ...] = ()  # lower-case words the match starts with (scope ANCHORS)
    keep: str | None = None  # with a ``value`` group: only the value is replaced (key=value)


_A = "(?<![0-9A-Za-z])"  # ASCII boundaries: \b would not separate digits from Chinese characters
_Z = "(?![0-9A-Za-z])"
# A phone extension: 021-55551234转123, 分机 806, ext. 23, x23. It goes with the number.
_EXT = r"(?:\s?(?:转|分机|[Ee][Xx][Tt]\.?|[Xx])\s?\d{1,6})?"
# Chinese area codes: 010 (Beijing), 02x (Shanghai, Guangzhou, Wuhan...), else 0 and three digits, 3-9 first.
_CN_AREA = r"0(?:10|2\d|[3-9]\d{2})"
# Numbers written in spaced groups (078 05 1120, 415 555 0100) count only alone: not next to
# another number ("lot 12 078 05 1120", "415 555 1991-11-21"), where the groups are a list.
_ALONE_BEFORE = r"(?<![0-9A-Za-z])(?<![0-9][ ./:-])"
_ALONE_AFTER = r"(?![0-9A-Za-z]|[ ./:-][0-9])"
_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "client_secret", "client-secret", "secret_key",
                 "secret-key", "api_key", "api-key", "apikey", "access_key", "access-key", "access_token",
                 "access-token", "auth_token", "auth-token", "refresh_token", "refresh-token", "token",
                 "private_key", "private-key")
_SECRET_KEYS = "|".join(sorted((re.escape(w) for w in _SECRET_WORDS), key=len, reverse=True))
_SECRET_KEY_NAME = re.compile(rf"(?i)^(?:{_SECRET_KEYS})$")
_NUM, _ANCH = _Scope.NUMBERS, _Scope.ANCHORS


def _rules() -> list[_Rule]:
    t = {k: (k.value, _TOKEN[k]) for k in PiiKind}
    s, e, i, c, p, ip = (t[k] for k in (PiiKind.SECRET, PiiKind.EMAIL, PiiKind.NATIONAL_ID,
                                          PiiKind.BANK_CARD, PiiKind.PHONE, PiiKind.IP_ADDRESS))
    return [
        _Rule(*s, re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
              hints=("-----BEGIN",)),
        _Rule(*s, re.compile(r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
              hints=("eyJ",)),
        _Rule(*s, re.compile(
            r"(?<![A-Za-z0-9_-])(?:sk-[A-Za-z0-9_-]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}"
            r"|github_pat_[A-Za-z0-9_]{22,}|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}"
            r"|[rs]k_(?:live|test)_[0-9A-Za-z]{16,})(?![A-Za-z0-9_-])"),
              hints=("sk-", "AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AIza", "k_live_",
                     "k_test_")),
        _Rule(*s, re.compile(r"(?i)(?<![A-Za-z0-9_])(?P<key>(?:bearer|token|basic)\s+)(?P<value>[A-Za-z0-9._~+/=-]{16,})"),
              check=_not_already_redacted, scope=_ANCH, anchors=("bearer", "token", "basic"), keep="key"),
        _Rule(*s, re.compile(rf"(?i)(?<![A-Za-z0-9_-])(?P<key>(?:{_SECRET_KEYS})[\"']?\s*[:=]\s*)"
                             r"(?P<value>\[[A-Z][A-Z_]*\]|\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'}\]]+)"),
              check=_not_already_redacted, scope=_ANCH, keep="key",
              anchors=("pass", "secret", "client", "api", "access", "auth", "refresh", "token", "private")),
        # The same in Chinese: 密码是Hunter2, 口令：hunter2. The value must be ASCII (after
        # width folding) so that a question, 我的密码是什么？, keeps its words.
        _Rule(*s, re.compile(r"(?P<key>(?:密码|口令|密钥|秘钥|私钥|令牌)\s*(?:是|为|[:=])\s*)"
                             r"(?P<value>[\x21-\x2b\x2d-\x3a\x3c-\x7e]{3,})"),
              check=_not_already_redacted, scope=_ANCH, keep="key",
              anchors=("密码", "口令", "密钥", "秘钥", "私钥", "令牌")),
        _Rule(*s, re.compile(r"(?<![A-Za-z0-9_+/=-])[A-Za-z0-9_+/=-]{32,}(?![A-Za-z0-9_+/=-])"), check=_high_entropy),
        _Rule(*e, re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
                             r"(?![A-Za-z0-9-])"),
              hints=("@",)),
        # Written whole or, alone, in the groups people use: 110105 19491231 002X (region, birth
        # date, the rest), 110105 1949 1231 002X, 1101 0519 4912 3100 2X, with spaces or hyphens,
        # the same throughout. Only these layouts: any 18 digits in a row of small numbers ("3 3
        # 1001 2024-03-15 8080") hold a real date often enough to pass the check digit by chance.
        _Rule(*i, re.compile(_A + r"\d{17}[\dXx]" + _Z + "|" + _ALONE_BEFORE
                             + r"(?:\d{6}([ -])\d{8}\1\d{3}|\d{6}([ -])\d{4}\2\d{4}\2\d{3}"
                             r"|\d{4}([ -])\d{4}\3\d{4}\3\d{4}\3\d)[\dXx]" + _ALONE_AFTER),
              check=lambda m: cn_id_valid(re.sub(r"[ -]", "", m.group(0))), scope=_NUM),
        # A US SSN, 078-05-1120 or, alone, 078 05 1120.
        _Rule(*i, re.compile(r"(?<![0-9A-Za-z-])\d{3}-\d{2}-\d{4}(?![0-9A-Za-z-])|"
                             + _ALONE_BEFORE + r"\d{3} \d{2} \d{4}" + _ALONE_AFTER), check=_ssn_valid, scope=_NUM),
        # Contiguous numbers must start like a card (2-6): epoch milliseconds and the like start with 1.
        _Rule(*c, re.compile(r"(?<![0-9A-Za-z-])(?:[2-6]\d{12,18}|\d{4}(?:[ -]\d{4}){2,3}(?:[ -]\d{1,3})?"
                             r"|\d{4}[ -]\d{6}[ -]\d{4,5})(?![0-9A-Za-z-])"), check=_card_valid, scope=_NUM),
        _Rule(*p, re.compile(_A + r"(?:\+?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}" + _Z), scope=_NUM),
        # A group in parentheses only as a whole "(20)": a lone ")" closes the sentence's
        # parenthesis ("Dana (+1 415 555 0199).") and must stay.
        _Rule(*p, re.compile(r"(?<![0-9A-Za-z+])(?P<num>\+\d{1,3}(?:[ .-]?(?:\(\d{1,4}\)|\d{1,4})){2,5})" + _EXT + _Z),
              check=_digit_count(8, 15), scope=_NUM),
        # A Chinese landline: the area code apart, then 7 or 8 digits not starting with 0 (real
        # ones start with 2-8, but examples such as 010-12345678 are what people type). The
        # leading 0, the code's shape and the separator keep dates (2024-03-15), times
        # (0930-1130) and order numbers out. After a hyphen or in parentheses the number may be
        # whole (010-12345678, (021) 5555 1234, 0755-8765 4321); after a space it must be in two
        # groups and alone (010 1234 5678): "0305 20240315" is as likely a code and a date.
        _Rule(*p, re.compile(r"(?<![0-9A-Za-z+])(?:\(" + _CN_AREA + r"\)[ -]?|" + _CN_AREA + r"-)"
                             r"[1-9]\d{2,3}[ -]?\d{4}" + _EXT + _Z + "|"
                             + _ALONE_BEFORE + _CN_AREA + r" [1-9]\d{2,3}[ -]\d{4}" + _EXT + _ALONE_AFTER), scope=_NUM),
        # North American: (415) 555-0100, 415-555-0100, 415.555.0100, 1-800-555-0100.
        _Rule(*p, re.compile(_A + r"(?:1[-.])?(?:\(\d{3}\)\s?\d{3}[-. ]|\d{3}[-.]\d{3}[-.])\d{4}" + _EXT + _Z),
              scope=_NUM),
        # ... and 415 555 0100: alone, with an area code and an exchange that start with 2-9.
        _Rule(*p, re.compile(_ALONE_BEFORE + r"(?<!\+)[2-9]\d{2} [2-9]\d{2} \d{4}" + _EXT + _ALONE_AFTER), scope=_NUM),
        _Rule(*ip, re.compile(r"(?<![0-9A-Za-z.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}"
                              r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![0-9A-Za-z]|\.\d)"), check=_ipv4_valid, scope=_NUM),
        _Rule(*ip, re.compile(r"(?<![0-9A-Za-z:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Za-z:])"),
              check=_ipv6_valid, hints=("::", ":0", ":1", ":2", ":3", ":4", ":5", ":6", ":7", ":8", ":9")),
    ]


_BUILTIN = _rules()
# Runs of digits with the separators numbers are written with, and phone extensions (转123,
# 分机 806, ext. 23, x23); PII that is numbers lies inside one.
_NUM_RUN = re.compile(r"[0-9](?:[0-9 ().:+/\-]+|转|分机|[Ee][Xx][Tt]|[Xx])*")
_CONTEXT = 3  # characters around a run that lookbehinds and lookaheads may need to see


class _Text:
    """One text being redacted, with what the rules need computed at most once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._numbers: list[tuple[int, int]] | None = None
        self._lower: str | None = None
        self.spans: list[tuple[int, int, str]] = []  # (start, end, replacement), kept sorted

    def numbers(self) -> list[tuple[int, int]]:
        if self._numbers is None:
            n = len(self.text)
            self._numbers = [(max(0, m.start() - _CONTEXT), min(n, m.end() + _CONTEXT))
                             for m in _NUM_RUN.finditer(self.text) if m.end() - m.start() >= 7]
        return self._numbers

    def anchored(self, anchors: tuple[str, ...]) -> list[int] | None:
        """Start positions of the anchors; None if lower-casing changed the length (then scan all)."""
        if self._lower is None:
            self._lower = self.text.lower()
        if len(self._lower) != len(self.text):
            return None
        found = set()
        for a in anchors:
            i = self._lower.find(a)
            while i >= 0:
                found.add(i)
                i = self._lower.find(a, i + 1)
        return sorted(found)

    def free(self, start: int, end: int) -> bool:
        i = bisect.bisect_left(self.spans, (start,))
        if i > 0 and self.spans[i - 1][1] > start:
            return False
        return i == len(self.spans) or self.spans[i][0] >= end

    def claim(self, start: int, end: int, replacement: str) -> None:
        bisect.insort(self.spans, (start, end, replacement))

    def result(self) -> str:
        if not self.spans:
            return self.text
        out, pos = [], 0
        for start, end, rep in self.spans:
            out.append(self.text[pos:start])
            out.append(rep)
            pos = end
        out.append(self.text[pos:])
        return "".join(out)


class Redactor:
    """Replaces personal data and secrets in text and in JSON-like values.

    Args:
        kinds: which built-in kinds to redact (default: all of :class:`PiiKind`).
        custom: extra :class:`PiiPattern` rules; they run before the built-ins.
        enabled: ``False`` makes the redactor return everything unchanged.
    """

    def __init__(self, kinds: Iterable[PiiKind | str] | None = None, custom: Iterable[PiiPattern] = (),
                 *, enabled: bool = True) -> None:
        try:
            wanted = {PiiKind(k) for k in kinds} if kinds is not None else set(PiiKind)
        except ValueError:
            raise InvalidInputError(f"PII kinds are {', '.join(k.value for k in PiiKind)}; got {kinds!r}") from None
        self.enabled = bool(enabled)
        self.kinds = frozenset(wanted)
        self._rules = [self._custom_rule(p) for p in custom] + [r for r in _BUILTIN if PiiKind(r.kind) in wanted]

    @staticmethod
    def _custom_rule(p: PiiPattern) -> _Rule:
        if not isinstance(p, PiiPattern) or not isinstance(p.name, str) or not p.name.strip():
            raise InvalidInputError("custom redaction patterns must be PiiPattern(name, pattern, ...)")
        try:
            regex = p.pattern if isinstance(p.pattern, re.Pattern) else re.compile(p.pattern)
        except re.error as exc:
            raise InvalidInputError(f"redaction pattern {p.name!r} is not a valid regular expression: {exc}") from None
        validate = p.validate
        check = None if validate is None else (lambda m: bool(validate(m.group(0))))
        token = p.replacement if p.replacement is not None else f"[{p.name.upper()}]"
        return _Rule(p.name, token, regex, check)

    def redact(self, text: str, counts: Counter[str] | None = None) -> str:
        """``text`` with every match replaced; ``counts`` (if given) is increased per kind.

        An earlier rule's match wins over a later one that overlaps it.
        """
        if not self.enabled or not text:
            return text
        # Full-width forms (what Chinese input methods type: １３８…, ａｌｉｃｅ＠…) are matched
        # folded; the spans are the same positions in the original, which is what is kept.
        folded = text.translate(WIDTH_FOLD)
        state = _Text(folded)
        json_like = text.lstrip()[:1] in ("{", "[")
        for rule in self._rules:
            if rule.hints and not any(h in folded for h in rule.hints):
                continue
            for m in self._matches(rule, state):
                start, end = m.span("value") if rule.keep else m.span()
                if start == end or not state.free(start, end) or (rule.check is not None and not rule.check(m)):
                    continue
                if counts is not None:
                    counts[rule.kind] += 1
                state.claim(start, end, self._replacement(rule, m, json_like))
        state.text = text  # the spans apply to the original: folding kept every position
        return state.result()

    @staticmethod
    def _matches(rule: _Rule, state: _Text) -> Iterable[re.Match[str]]:
        text = state.text
        if rule.scope is _Scope.NUMBERS:
            for lo, hi in state.numbers():
                yield from rule.regex.finditer(text, lo, hi)
            return
        if rule.scope is _Scope.ANCHORS:
            starts = state.anchored(rule.anchors)
            if starts is not None:
                for pos in starts:
                    m = rule.regex.match(text, pos)
                    if m is not None:
                        yield m
                return
        yield from rule.regex.finditer(text)

    @staticmethod
    def _replacement(rule: _Rule, m: re.Match[str], json_like: bool) -> str:
        if rule.keep is not None:
            value = m.group("value")
            quote = value[0] if len(value) > 1 and value[0] in ("'", '"') and value[-1] == value[0] else ""
            return quote + rule.token + quote
        if json_like and _bare_json_value(m):
            return f'"{rule.token}"'
        return rule.token

    def redact_value(self, value: Any, counts: Counter[str] | None = None, _depth: int = 0) -> Any:
        """A JSON-like value with its strings redacted (and numbers that are PII, e.g. a card
        number stored as an int, replaced by the token). Values under secret-looking keys
        (``password``, ``api_key``, ``token``...) are replaced whole. Returns a new value."""
        if not self.enabled or value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            return self.redact(value, counts)
        if isinstance(value, (int, float)):
            text = str(value)
            out = self.redact(text, counts)
            return value if out == text else out
        if _depth > 64:
            raise InvalidInputError("a tool input or output is nested too deeply")
        if isinstance(value, Mapping):
            out_map = {}
            for k, v in value.items():
                if _secret_entry(k, v, counts):
                    out_map[k] = _TOKEN[PiiKind.SECRET]
                else:
                    out_map[k] = self.redact_value(v, counts, _depth + 1)
            return out_map
        if isinstance(value, (list, tuple)):
            return [self.redact_value(v, counts, _depth + 1) for v in value]
        return self.redact(str(value), counts)

    def redact_tree(self, value: Any, counts: Counter[str] | None = None) -> Any:
        """:meth:`redact_value` at any depth, without recursion: for metadata, which may nest
        as deep as JSON allows. Keys are kept; every string (and PII-looking number) under
        them is redacted, values under secret-looking keys are replaced whole."""
        if not self.enabled or not isinstance(value, (Mapping, list, tuple)):
            return self.redact_value(value, counts)
        root: list[Any] = [value]
        stack: list[tuple[Any, Any]] = [(root, 0)]
        while stack:
            holder, key = stack.pop()
            v = holder[key]
            if isinstance(v, Mapping):
                new: dict[Any, Any] = {}
                for k, item in v.items():
                    if _secret_entry(k, item, counts):
                        new[k] = _TOKEN[PiiKind.SECRET]
                    else:
                        new[k] = item
                        stack.append((new, k))
                holder[key] = new
            elif isinstance(v, (list, tuple)):
                items = list(v)
                holder[key] = items
                stack.extend((items, i) for i in range(len(items)))
            else:
                holder[key] = self.redact_value(v, counts)  # a scalar: no recursion
        return root[0]


def _secret_entry(key: Any, value: Any, counts: Counter[str] | None) -> bool:
    """Is ``value`` a scalar under a secret-looking key (``password``, ``api_key``...)? Counted if so."""
    if (isinstance(key, str) and _SECRET_KEY_NAME.match(key) and value not in (None, "")
            and not isinstance(value, (Mapping, list, tuple, bool))):
        if counts is not None:
            counts[PiiKind.SECRET.value] += 1
        return True
    return False


def _bare_json_value(m: re.Match[str]) -> bool:
    """Is the match a whole unquoted JSON value (``"card": 4111111111111111,``)?"""
    s = m.string
    before = s[: m.start()].rstrip()[-1:]
    after = s[m.end():].lstrip()[:1]
    return before in (":", ",", "[") and after in (",", "}", "]", "")
