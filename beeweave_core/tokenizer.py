"""The lexical tokenizer: English (lower-case, stop words, Snowball stemming) and
Chinese (jieba segmentation), including mixed Chinese/English text.

Its configuration is saved with the store and reloaded on open, so the index and
the queries are always cut the same way (a different stemmer at query time than at
index time silently ruins BM25).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any

from .errors import InvalidInputError, MissingDependencyError
from .quiet import quiet_jieba

__all__ = ["TokenizerConfig", "Tokenizer"]

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
CHINESE_STOPWORDS = frozenset(
    """的 了 是 在 和 与 及 或 就 都 而 也 还 又 很 着 吗 呢 吧 啊 呀 嘛 么 之 其 这 那 这个 那个 这些 那些 一个
    个 把 被 让 给 对 从 向 到 于 为 以 由 我 你 他 她 它 我们 你们 他们 她们 它们 自己 什么 怎么 怎样 如何 哪 哪里
    吗 有 没有 没 不 要 会 能 可以 请 说 做 去 来 上 下 中 里 后 前 时 时候 啊 哦 嗯""".split()
)


_JIEBA: Any = None
_JIEBA_LOCK = threading.Lock()


def _shared_jieba() -> Any:
    """One jieba dictionary per process: loading it takes about a second and it is read-only."""
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


@dataclass(frozen=True)
class TokenizerConfig:
    """What decides how text is cut. Stored with the index as JSON."""

    lowercase: bool = True
    stopwords: bool = True
    stemmer: str | None = "english"  # a Snowball language name, or None
    chinese: bool = True  # segment CJK runs with jieba
    version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenizerConfig:
        try:
            return cls(**data)
        except TypeError as exc:
            raise InvalidInputError(f"not a tokenizer configuration: {data!r}") from exc


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

    def tokenize(self, text: str) -> list[str]:
        cfg = self.config
        text = unicodedata.normalize("NFKC", text)
        if cfg.lowercase:
            text = text.lower()
        out: list[str] = []
        for cjk, word in _RUNS.findall(text):
            if word:
                if cfg.stopwords and word in ENGLISH_STOPWORDS:
                    continue
                out.append(self._stem(word) if cfg.stemmer else word)
            elif cfg.chinese:
                for piece in self._segment(cjk):
                    if not (cfg.stopwords and piece in CHINESE_STOPWORDS):
                        out.append(piece)
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
