"""The lexical tokenizer: English (lower-case, stop words, Snowball stemming) and
Chinese (jieba segmentation), including mixed Chinese/English text.

Its configuration is saved with the store and reloaded on open, so the index and
the queries are always cut the same way (a different stemmer at query time than at
index time silently ruins BM25). A store made before a setting existed reloads with
that setting off (``TokenizerConfig.from_dict``), so it keeps cutting text as it did.

Chinese (version 2 defaults):
- NFKC folds full-width letters, digits and punctuation to half-width; OpenCC converts
  traditional characters to simplified, so 記憶 and 记忆 are one term.
- jieba search mode, then a stop-word list of function words (``data/zh_stopwords.txt``).
- Character bigrams of every CJK run as extra terms: jieba cuts the same phrase
  differently in different contexts (and invents words for names it does not know), so a
  query and a memory may share no word yet share bigrams. Bigrams carry a prefix so that a
  bigram never adds to the count of the identical two-character word.
- Numbers: digit runs lose leading zeros (04月 = 4月), and a word written in Chinese
  numerals (三千, 二零二四年, 十一月, 周三) also yields its Arabic value, so dates and amounts
  match whichever way either side wrote them.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from importlib import resources
from typing import Any

from .config_rules import FLAG, Choice, Instance, Number, Rule, check_fields
from .errors import InvalidInputError, MissingDependencyError
from .quiet import quiet_jieba

__all__ = ["TokenizerConfig", "Tokenizer", "BIGRAM_PREFIX", "WIDTH_FOLD"]

# Full-width forms fold to ASCII one character for one (U+FF01-FF5E to U+0021-007E, the
# ideographic space to a space), for ``str.translate``. Unlike NFKC, a position in the folded
# text is the same position in the text: code that finds a span in the fold and cuts the
# original (redaction, time words) uses this.
WIDTH_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A CJK run, or a run of word characters that are not CJK (Latin, digits, accents...).
_RUNS = re.compile(rf"([{_CJK}]+)|([^\W{_CJK}]+)")

ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those through to
    too under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're you've
    your yours yourself yourselves s t d ll m re ve""".split()
)
# The list of version 1, kept as it was: stores made with it must keep cutting text the same way.
CHINESE_STOPWORDS_V1 = frozenset(
    """的 了 是 在 和 与 及 或 就 都 而 也 还 又 很 着 吗 呢 吧 啊 呀 嘛 么 之 其 这 那 这个 那个 这些 那些 一个
    个 把 被 让 给 对 从 向 到 于 为 以 由 我 你 他 她 它 我们 你们 他们 她们 它们 自己 什么 怎么 怎样 如何 哪 哪里
    吗 有 没有 没 不 要 会 能 可以 请 说 做 去 来 上 下 中 里 后 前 时 时候 啊 哦 嗯""".split()
)
CHINESE_STOPWORDS = CHINESE_STOPWORDS_V1  # the name earlier releases exported

# Prefix of a character-bigram term: never the start of a word term (a control character).
BIGRAM_PREFIX = "\x02"

# A number in Chinese numerals inside a CJK run, found on the run itself (jieba cuts 二零二四年
# into 二零二 + 四年): two or more numeral characters (三千, 二零二四, 十一), or one before a unit
# (三点, 五月, 三个, 一号). It must start with a digit numeral: 万一 ("in case") and 千万 ("by all
# means") are words, not numbers. A unit that is also an ordinary word part (分 as in 十分
# "very", 起 as in 一起) is left out.
_NUMERAL = re.compile(
    "[零〇一二两三四五六七八九十][零〇一二两三四五六七八九十百千万亿]+"
    "|[零〇二两三四五六七八九十](?=[年月日号点时岁个人天次元块位名层楼条本张周])"
    "|一(?=[月日号])"  # 一 before other units is mostly "a" (一点 "a little", 一个 "a")
)


_JIEBA: Any = None
_JIEBA_LOCK = threading.Lock()


def _shared_jieba() -> Any:
    """One jieba dictionary per process: loading it is slow and it is read-only."""
    global _JIEBA
    if _JIEBA is None:
        with _JIEBA_LOCK:
            if _JIEBA is None:
                try:
                    import jieba
                except ImportError as exc:  # pragma: no cover - a declared dependency
                    raise MissingDependencyError("Chinese text needs jieba: pip install jieba") from exc
                tok = jieba.Tokenizer()
                with quiet_jieba():  # its dictionary messages are not for the library's user
                    tok.initialize()
                _JIEBA = tok
    return _JIEBA


_OPENCC: Any = None


def _to_simplified(text: str) -> str:
    global _OPENCC
    if _OPENCC is None:
        with _JIEBA_LOCK:
            if _OPENCC is None:
                try:
                    import opencc
                except ImportError as exc:  # pragma: no cover - a declared dependency
                    raise MissingDependencyError(
                        "traditional-to-simplified conversion needs OpenCC: pip install opencc") from exc
                _OPENCC = opencc.OpenCC("t2s")
    return str(_OPENCC.convert(text))


@lru_cache(maxsize=1)
def _stopwords_v2() -> frozenset[str]:
    text = resources.files("beeweave_core").joinpath("data/zh_stopwords.txt").read_text(encoding="utf-8")
    return frozenset(w for line in text.splitlines() if not line.startswith("#") for w in line.split())


@lru_cache(maxsize=4096)
def _numeral_value(numerals: str) -> str | None:
    """The Arabic form of a run of Chinese numerals (cn2an, loaded on first use), or None."""
    try:
        import cn2an
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise MissingDependencyError("Chinese numerals need cn2an: pip install cn2an") from exc
    try:
        value = cn2an.cn2an(numerals, "smart")
    except (ValueError, KeyError, IndexError):
        return None  # not a well-formed number (e.g. 十百)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


@dataclass(frozen=True)
class TokenizerConfig:
    """What decides how text is cut. Stored with the index as JSON.

    A configuration read back from a store made before a field existed gets that field's
    ``_LEGACY`` value (the behaviour the store was built with), not the new default.
    """

    lowercase: bool = True
    stopwords: bool = True
    stemmer: str | None = "english"  # a Snowball language name, or None
    chinese: bool = True  # segment CJK runs with jieba
    version: int = 2
    chinese_stopwords: str = "v2"  # "v1": the short built-in list; "v2": data/zh_stopwords.txt
    traditional_to_simplified: bool = True  # OpenCC t2s before segmenting
    cjk_bigrams: bool = True  # character bigrams of CJK runs as extra terms
    numbers: bool = True  # digit runs without leading zeros; Chinese numerals also as Arabic

    def __post_init__(self) -> None:
        check_fields(self, _TOKENIZER_RULES)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenizerConfig:
        if not isinstance(data, dict):
            raise InvalidInputError(f"not a tokenizer configuration: {data!r}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidInputError(f"not a tokenizer configuration (unknown {sorted(unknown)}): {data!r}")
        filled = {**{k: v for k, v in _LEGACY.items() if k not in data}, **data}
        if "version" not in data:
            filled["version"] = 1
        try:
            return cls(**filled)
        except TypeError as exc:  # pragma: no cover - every field has a value by now
            raise InvalidInputError(f"not a tokenizer configuration: {data!r}") from exc


_TOKENIZER_RULES: dict[str, Rule] = {
    "lowercase": FLAG, "stopwords": FLAG, "stemmer": Instance(str, "a Snowball language name", optional=True),
    "chinese": FLAG, "version": Number(1, integer=True), "chinese_stopwords": Choice(("v1", "v2")),
    "traditional_to_simplified": FLAG, "cjk_bigrams": FLAG, "numbers": FLAG,
}

# What a store saved before these fields existed was built with (version 1).
_LEGACY: dict[str, Any] = {"chinese_stopwords": "v1", "traditional_to_simplified": False, "cjk_bigrams": False,
                           "numbers": False}


class Tokenizer:
    """Turns text into index terms. Thread-safe; loads jieba and the stemmer lazily.

    >>> Tokenizer()("Running agents remember 用户的偏好")[:3]
    ['run', 'agent', 'rememb']
    """

    def __init__(self, config: TokenizerConfig | None = None) -> None:
        self.config = config or TokenizerConfig()
        self._stemmer: Any = None
        self._jieba: Any = None
        self._lock = threading.Lock()
        self._stem_cache: dict[str, str] = {}

    def __call__(self, text: str) -> list[str]:
        return self.tokenize(text)

    @property
    def chinese_stopwords(self) -> frozenset[str]:
        return CHINESE_STOPWORDS_V1 if self.config.chinese_stopwords == "v1" else _stopwords_v2()

    def tokenize(self, text: str) -> list[str]:
        cfg = self.config
        text = unicodedata.normalize("NFKC", text)  # full-width -> half-width, ligatures...
        if cfg.lowercase:
            text = text.lower()
        out: list[str] = []
        zh_stop = self.chinese_stopwords if cfg.stopwords else frozenset()
        for cjk, word in _RUNS.findall(text):
            if word:
                if cfg.stopwords and word in ENGLISH_STOPWORDS:
                    continue
                if cfg.numbers and word.isdigit():
                    out.append(word.lstrip("0") or "0")
                    continue
                out.append(self._stem(word) if cfg.stemmer else word)
            elif cfg.chinese:
                if cfg.traditional_to_simplified:
                    cjk = _to_simplified(cjk)
                out.extend(piece for piece in self._segment(cjk) if piece not in zh_stop)
                if cfg.numbers:
                    out.extend(_numerals(cjk))
                if cfg.cjk_bigrams:
                    out.extend(_bigrams(cjk, zh_stop))
            else:
                out.extend(cjk)  # one term per character without a segmenter
        return out

    def _stem(self, word: str) -> str:
        # Stemming dominates tokenizing cost; agent text repeats words a lot.
        cached = self._stem_cache.get(word)
        if cached is not None:
            return cached
        if self._stemmer is None:
            with self._lock:
                if self._stemmer is None:
                    try:
                        import Stemmer
                    except ImportError as exc:  # pragma: no cover - a declared dependency
                        raise MissingDependencyError("stemming needs PyStemmer: pip install PyStemmer") from exc
                    self._stemmer = Stemmer.Stemmer(self.config.stemmer)
        with self._lock:  # PyStemmer objects are not thread-safe
            stem = self._stemmer.stemWord(word)
        if len(self._stem_cache) < 200_000:
            self._stem_cache[word] = stem
        return stem

    def _segment(self, run: str) -> list[str]:
        if self._jieba is None:
            self._jieba = _shared_jieba()
        # Search mode also yields the short words inside long ones (中华人民共和国 ->
        # 中华, 人民, 共和国...), so a query using a part still matches the whole.
        return [w for w in self._jieba.cut_for_search(run) if w.strip()]


def _numerals(run: str) -> list[str]:
    """The Arabic values of the numbers written in Chinese numerals in a CJK run (三千 -> 3000)."""
    out = []
    for m in _NUMERAL.finditer(run):
        value = _numeral_value(m.group())
        if value is not None:
            out.append(value)
    return out


def _bigrams(run: str, stop: frozenset[str]) -> list[str]:
    """Prefixed character bigrams of a CJK run; one with a stop character (的, 是, 我...) is noise."""
    return [BIGRAM_PREFIX + run[i : i + 2] for i in range(len(run) - 1)
            if run[i] not in stop and run[i + 1] not in stop]
