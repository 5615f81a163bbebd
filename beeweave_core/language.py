"""Which languages an embedder covers, which scripts a query is written in, and what that
means for fusion.

An embedding model trained on English text (the bundled all-MiniLM-L6-v2) maps Chinese
text to vectors that are close to each other whatever they say: fused at full weight,
its scores add noise to a good lexical ranking. So the vector side's weight scales with
the share of the query written in scripts the embedder covers, down to a floor for the
part it does not cover. A model that covers the query's language (a multilingual or a
Chinese model) is used at full weight; a model whose languages are unknown too, so that
nothing changes for a model we know nothing about.

An embedder declares its languages in an optional ``languages`` attribute: a frozenset of
ISO 639-1 codes, ``{"*"}`` for any language. Without one, ``model_languages`` guesses from
a sentence-transformers model card (``language:`` in the README's front matter, as saved
by ``save_pretrained`` and shipped by the Hugging Face hub) or from the model's name.

For Chinese memories, pass a model that covers Chinese (it must be on disk: nothing is
downloaded at run time), e.g. ``BeeWeave(embedder="BAAI/bge-small-zh-v1.5")`` (small, fast,
Chinese + English; give it ``query_prefix="为这个句子生成表示以用于检索相关文章："`` through
``SentenceTransformerEmbedder``), ``BAAI/bge-m3`` (multilingual, 568M parameters: best recall,
slow on a CPU), ``intfloat/multilingual-e5-small`` or ``shibing624/text2vec-base-chinese``.
With the bundled English model, Chinese search is essentially BM25 over jieba.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["ANY_LANGUAGE", "Script", "FusionPolicy", "embedder_languages", "model_languages", "script_shares",
           "coverage", "retriever_weights"]

ANY_LANGUAGE = "*"


class Script(str, Enum):
    LATIN = "latin"
    HAN = "han"  # Chinese characters (also written in Japanese, formerly Korean)
    KANA = "kana"
    HANGUL = "hangul"
    CYRILLIC = "cyrillic"
    GREEK = "greek"
    ARABIC = "arabic"
    HEBREW = "hebrew"
    DEVANAGARI = "devanagari"
    THAI = "thai"
    OTHER = "other"


# The languages whose text is in each script: a script is covered when the embedder covers any
# of them (a Latin-script language other than English is still closer to an English model's
# training text than Chinese is).
_SCRIPT_LANGUAGES: dict[Script, frozenset[str]] = {
    Script.LATIN: frozenset("en fr de es it pt nl sv da no nb nn fi pl cs sk sl hr ro hu tr id ms vi ca eu gl "
                            "et lv lt sq af sw tl cy ga is mt eo la".split()),
    Script.HAN: frozenset({"zh", "ja"}),
    Script.KANA: frozenset({"ja"}),
    Script.HANGUL: frozenset({"ko"}),
    Script.CYRILLIC: frozenset("ru uk bg sr mk be kk ky mn tg".split()),
    Script.GREEK: frozenset({"el"}),
    Script.ARABIC: frozenset({"ar", "fa", "ur", "ps", "ug"}),
    Script.HEBREW: frozenset({"he", "yi"}),
    Script.DEVANAGARI: frozenset({"hi", "mr", "ne", "sa"}),
    Script.THAI: frozenset({"th"}),
    Script.OTHER: frozenset(),
}

# Unicode name prefixes of letters, per script (unicodedata.name is cheap and exhaustive).
_NAME_PREFIXES: tuple[tuple[str, Script], ...] = (
    ("LATIN", Script.LATIN), ("CJK", Script.HAN), ("HIRAGANA", Script.KANA), ("KATAKANA", Script.KANA),
    ("HANGUL", Script.HANGUL), ("CYRILLIC", Script.CYRILLIC), ("GREEK", Script.GREEK), ("ARABIC", Script.ARABIC),
    ("HEBREW", Script.HEBREW), ("DEVANAGARI", Script.DEVANAGARI), ("THAI", Script.THAI),
)


@lru_cache(maxsize=8192)
def _script(ch: str) -> Script | None:
    """The script of a letter; None for digits, punctuation, spaces, symbols."""
    if ch.isascii():
        return Script.LATIN if ch.isalpha() else None
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    for prefix, script in _NAME_PREFIXES:
        if name.startswith(prefix):
            return script
    return Script.OTHER


def script_shares(text: str, *, limit: int = 4000) -> dict[Script, float]:
    """The share of the text's letters in each script (a Chinese character counts as one
    letter, as an English letter does; words would favour Chinese less, but letters need
    no segmenter). Only the first ``limit`` characters are read: a long query's script
    does not change halfway."""
    counts: dict[Script, int] = {}
    for ch in text[:limit]:
        s = _script(ch)
        if s is not None:
            counts[s] = counts.get(s, 0) + 1
    total = sum(counts.values())
    return {s: n / total for s, n in counts.items()} if total else {}


def coverage(text: str, languages: Collection[str] | None) -> float:
    """The share of the text's letters in scripts that ``languages`` covers (1.0 when the
    languages are unknown or any, or the text has no letters)."""
    if languages is None or ANY_LANGUAGE in languages:
        return 1.0
    shares = script_shares(text)
    if not shares:
        return 1.0
    langs = frozenset(languages)
    # Kana only occurs in Japanese: Chinese characters next to it are Japanese too.
    han_langs = _SCRIPT_LANGUAGES[Script.KANA] if Script.KANA in shares else _SCRIPT_LANGUAGES[Script.HAN]
    covered = 0.0
    for script, share in shares.items():
        script_langs = han_langs if script is Script.HAN else _SCRIPT_LANGUAGES[script]
        if script_langs & langs:
            covered += share
    return covered


@dataclass(frozen=True)
class FusionPolicy:
    """How far the vector side is trusted on text its model does not cover.

    Attributes:
        uncovered_vector_weight: the factor on the vector weight for the part of the query
            outside the embedder's languages (0 = lexical only there, 1 = ignore languages).
    """

    uncovered_vector_weight: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 <= self.uncovered_vector_weight <= 1.0:
            from .errors import InvalidInputError

            raise InvalidInputError("uncovered_vector_weight must be within [0, 1]")


def retriever_weights(query: str, languages: Collection[str] | None, base: Mapping[str, float],
                      policy: FusionPolicy | None = None) -> dict[str, float]:
    """The fusion weights for this query: ``base`` with the vector weight scaled by how much of
    the query the embedder covers (see ``FusionPolicy``)."""
    policy = policy or FusionPolicy()
    cov = coverage(query, languages)
    weights = dict(base)
    if cov < 1.0 and "vector" in weights:
        weights["vector"] = weights["vector"] * (cov + (1.0 - cov) * policy.uncovered_vector_weight)
    return weights


def embedder_languages(embedder: Any) -> frozenset[str] | None:
    """What an embedder says it covers: its ``languages`` attribute, None if it has none (unknown)."""
    langs = getattr(embedder, "languages", None)
    if langs is None:
        return None
    if isinstance(langs, str):
        return frozenset({langs})
    return frozenset(langs)


# Names that say a model covers many languages, or Chinese (bge-*-zh, text2vec-*, m3e...).
_MULTILINGUAL = re.compile(r"multilingual|\bm3\b|bge-m3|labse|xlm|mbert|mpnet-base-multi|\bmul\b|\bme5\b|"
                           r"multilingual-e5|gte-multilingual|jina-embeddings-v3|qwen\d?-embedding", re.I)
_CHINESE = re.compile(r"(?:^|[-_/])zh(?:$|[-_/.])|chinese|text2vec|m3e|\bsbert-chinese|ernie|piccolo|stella|"
                      r"acge|conan|tao-8k|dmeta|xiaobu", re.I)


@lru_cache(maxsize=64)
def model_languages(name_or_path: str) -> frozenset[str] | None:
    """The languages of a sentence-transformers model, from its card or its name; None if neither
    says (an unknown model is not held back)."""
    card = _card_languages(name_or_path)
    if card is not None:
        return card
    if _MULTILINGUAL.search(name_or_path):
        return frozenset({ANY_LANGUAGE})
    if _CHINESE.search(name_or_path):
        return frozenset({"zh", "en"})  # Chinese models are trained on English too
    if re.search(r"all-minilm|all-mpnet|msmarco|multi-qa|bge-(?:small|base|large)-en|e5-(?:small|base|large)"
                 r"(?:-v2)?$|gte-(?:small|base|large)$", name_or_path, re.I):
        return frozenset({"en"})
    return None


_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---", re.S)


def _card_languages(name_or_path: str) -> frozenset[str] | None:
    readme = Path(name_or_path) / "README.md"
    try:
        text = readme.read_text(encoding="utf-8")[:20000] if readme.is_file() else ""
    except OSError:
        return None
    m = _FRONT_MATTER.match(text)
    if m is None:
        return None
    langs: list[str] = []
    lines = m.group(1).splitlines()
    for i, line in enumerate(lines):
        key, _, value = line.partition(":")
        if key.strip() != "language":
            continue
        value = value.strip()
        if value.startswith("["):  # language: [en, zh]
            langs = [v.strip(" '\"") for v in value.strip("[]").split(",")]
        elif value:  # language: en
            langs = [value.strip(" '\"")]
        else:  # a YAML list on the next lines
            for item in lines[i + 1:]:
                if not item.lstrip().startswith("-"):
                    break
                langs.append(item.strip().lstrip("-").strip(" '\""))
        break
    langs = [x.lower() for x in langs if x]
    if not langs:
        return None
    if "multilingual" in langs or len(langs) >= 10:
        return frozenset({ANY_LANGUAGE})
    return frozenset(langs)
