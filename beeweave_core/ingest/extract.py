"""Extraction: a short summary, 3-5 tags, entities and an intent for a piece of knowledge.

:class:`OfflineExtractor` needs no model: the summary is the first sentence or two of
the answer, tags are the best-scoring words (term frequency, words of the question
counted twice, with jieba's TF-IDF for Chinese), entities are proper names (capitalised
or upper-case words, CamelCase and dotted identifiers; jieba's person/place/organisation
tags for Chinese) and the intent comes from English and Chinese cue words.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..records import ContentType, Intent, ProcessedContent
from ..tokenizer import CHINESE_STOPWORDS, ENGLISH_STOPWORDS
from .importance import stated_importance
from .statements import FactStatement

__all__ = ["Extraction", "Extractor", "OfflineExtractor", "classify_intent", "summarize", "REDACTION_TOKEN"]

REDACTION_TOKEN = re.compile(r"\[[A-Z][A-Z_]*\]")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+#-]*[A-Za-z0-9+#]|[A-Za-z]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")
_FENCED = re.compile(r"```.*?(```|$)", re.S)
# Words that say how something is asked, not what it is about.
FILLER = frozenset("""use used using get got make made want need like please thanks thank hello hi yes ok okay
    also just really way ways know tell show help let give one two thing things something anything everything
    would could should can may might must shall will able via etc e g i e vs new good best better well much many
    lot lots sure kind try trying tried work works working go going see look looking find question answer
    check checked checking checks ask asked asking say said says think thought wonder wondering seem seems
    seemed quick quickly fast simple simply basically actually""".split())
# Chinese tags are nouns and noun-like words (jieba's part-of-speech flags): verbs of asking
# ("写个"), adverbs ("快速") and pronouns ("哪种") say how something is asked, not what about.
_CHINESE_TAG_POS = ("n", "nr", "ns", "nt", "nz", "nrt", "nrfg", "vn", "an", "eng", "l", "j")


@dataclass(frozen=True)
class Extraction:
    """What an extractor finds in one piece of knowledge."""

    summary: str
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    intent: Intent = Intent.OTHER
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. which extractor produced it
    category: str | None = None  # e.g. "preference", "fact", "procedure" (the model's word)
    confidence: float | None = None  # in [0, 1]; None: not judged
    importance: float | None = None  # in [0, 1]; None: not judged
    # What the user stated about themselves that can change (where they live...). None: the
    # extractor did not look, so the pipeline's offline rules do (``statements``).
    facts: tuple[FactStatement, ...] | None = None


@runtime_checkable
class Extractor(Protocol):
    """Turns a question and its answer (either may be empty) into an :class:`Extraction`."""

    def extract(self, query: str, response: str, *, content: ProcessedContent | None = None) -> Extraction: ...


# -- intent ----------------------------------------------------------------------------
_INTENT_CUES: dict[Intent, list[tuple[re.Pattern[str], float]]] = {
    Intent.PROBLEM_DIAGNOSIS: [
        (re.compile(r"(?i)\b(error|exception|traceback|stack ?trace|crash(es|ed|ing)?|bug|broken|segfault|"
                    r"fail(s|ed|ing|ure)?|not working|doesn't work|does not work|won't|can't connect|cannot connect|"
                    r"timed? ?out|debug|troubleshoot)\b"), 3.0),
        (re.compile(r"(?i)\bwhy (is|does|do|am|are|did)\b.*\b(not|n't|never)\b"), 3.0),
        (re.compile(r"(?i)\b(fix|issue|problem|warning)\b"), 1.0),
        (re.compile(r"报错|错误|异常|失败|崩溃|无法|不能用|不工作|出错|故障|超时|修复|调试|为什么.*(不|没)"), 3.0),
    ],
    Intent.CODE_GENERATION: [
        (re.compile(r"(?i)\b(write|create|generate|implement|code|build|make)\b.{0,30}\b(function|script|class|"
                    r"program|method|snippet|regex|query|test|api|endpoint|cli|code)\b"), 2.0),
        (re.compile(r"(?i)\b(implement|refactor|snippet)\b"), 1.0),
        (re.compile(r"(写|编写|生成|实现).{0,8}(函数|脚本|程序|代码|类|正则|接口|方法)|代码示例"), 2.0),
    ],
    Intent.DOCUMENT_WRITING: [
        (re.compile(r"(?i)\b(write|draft|compose|rewrite|proofread|edit|polish)\b.{0,30}\b(e-?mail|letter|essay|"
                    r"article|report|blog|post|summary|documentation|docs|readme|proposal|story|poem|memo|"
                    r"announcement|description|speech)\b"), 2.0),
        (re.compile(r"(?i)\b(summari[sz]e|translate|outline|paraphrase)\b"), 1.5),
        (re.compile(r"(写|起草|撰写|润色|改写).{0,8}(邮件|文章|报告|总结|文档|信|简历|方案|通知|故事|诗)|翻译|总结一下|大纲"), 2.0),
    ],
    Intent.INFORMATION_QUERY: [
        (re.compile(r"(?i)^\s*(what|who|whom|when|where|which|how|why|is|are|does|do|can|could|should|explain|"
                    r"define|describe|tell me)\b"), 1.5),
        (re.compile(r"(?i)\b(what|who|when|where|which|how (do|does|to|can|much|many|long)|explain|meaning of|"
                    r"difference between)\b"), 1.0),
        (re.compile(r"[?？]\s*$"), 1.0),
        (re.compile(r"什么|怎么|怎样|如何|为什么|哪里|哪个|哪些|谁|吗[?？。]?\s*$|呢[?？。]?\s*$|多少|是否|介绍|解释|区别"), 1.5),
    ],
}
_PRECEDENCE = [Intent.PROBLEM_DIAGNOSIS, Intent.CODE_GENERATION, Intent.DOCUMENT_WRITING, Intent.INFORMATION_QUERY]


def classify_intent(query: str, response: str = "") -> Intent:
    """The intent of a request, from cue words in the query (the answer only breaks ties:
    an answer that is code makes a code request more likely)."""
    text = query.strip() or response.strip()
    if not text:
        return Intent.OTHER
    scores = {intent: sum(w for p, w in cues if p.search(text)) for intent, cues in _INTENT_CUES.items()}
    if query.strip() and "```" in response:
        scores[Intent.CODE_GENERATION] += 0.5
    best = max(_PRECEDENCE, key=lambda i: (scores[i], -_PRECEDENCE.index(i)))
    return best if scores[best] > 0 else Intent.OTHER


# -- summary -----------------------------------------------------------------------------
def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def summarize(query: str, response: str, content: ProcessedContent | None = None, *, max_chars: int = 240) -> str:
    """One or two sentences: the answer's first sentence (and the second if the first is short);
    for code or data answers, what they are and which question they answer."""
    prose = _FENCED.sub(" ", response).strip()
    kind = content.type if content is not None else ContentType.TEXT
    first_q = (_sentences(query) or [""])[0]
    if kind is ContentType.CODE and len(prose) < 20:
        lang = (content.language or "").capitalize() if content else ""
        label = f"{lang} code".strip() if lang else "Code"
        out = f"{label} for: {first_q}" if first_q else label
    elif kind is ContentType.DATA and content is not None and isinstance(content.payload, (list, dict)):
        payload = content.payload
        if isinstance(payload, list) and payload and isinstance(payload[0], dict):
            out = f"Table of {len(payload)} rows with columns {', '.join(list(payload[0])[:6])}"
        elif isinstance(payload, dict):
            out = f"Data with fields {', '.join(list(payload)[:6])}"
        else:
            out = f"List of {len(payload)} items"
        if first_q:
            out += f", answering: {first_q}"
    else:
        sents = _sentences(prose) or _sentences(query)
        if sents and len(sents[0]) < 40 and len(sents) > 1:
            out = sents[0] + ("" if sents[0][-1] in "。！？；" else " ") + sents[1]  # no space after Chinese
        else:
            out = sents[0] if sents else ""
    out = " ".join(out.split())
    return out if len(out) <= max_chars else out[: max_chars - 1].rstrip() + "…"


# -- keywords and entities ----------------------------------------------------------------------
class _Jieba:
    """jieba's TF-IDF keywords and part-of-speech tags, loaded on first Chinese text.

    They cut with the dictionary the store's tokenizer already loaded (one per process):
    shallow copies of jieba's default objects share its IDF and tag tables and leave
    jieba's own defaults, which the application may use, untouched.
    """

    _lock = threading.Lock()
    _tfidf: Any = None
    _posseg: Any = None

    @classmethod
    def load(cls) -> tuple[Any, Any]:
        if cls._tfidf is None:
            with cls._lock:
                if cls._tfidf is None:
                    from ..errors import MissingDependencyError
                    from ..tokenizer import _shared_jieba

                    try:
                        import jieba.analyse
                        import jieba.posseg
                    except ImportError as exc:  # pragma: no cover - a declared dependency
                        raise MissingDependencyError("Chinese keywords need jieba: pip install jieba") from exc
                    shared = _shared_jieba()
                    posseg = _sibling(jieba.posseg.dt, tokenizer=shared)
                    cls._tfidf = _sibling(jieba.analyse.default_tfidf, tokenizer=shared, postokenizer=posseg)
                    cls._posseg = posseg
        return cls._tfidf, cls._posseg


def _sibling(obj: Any, **changes: Any) -> Any:
    """A shallow copy of ``obj`` with some attributes changed (``copy.copy`` trips over the
    ``__getattr__`` of jieba's POSTokenizer)."""
    twin = object.__new__(type(obj))
    twin.__dict__.update(vars(obj), **changes)
    return twin


def _english_keywords(query: str, text: str) -> dict[str, float]:
    scores: defaultdict[str, float] = defaultdict(float)
    for weight, part in ((2.0, query), (1.0, text)):
        for w in _WORD.findall(part):
            lw = w.lower()
            if len(lw) < 3 or lw in ENGLISH_STOPWORDS or lw in FILLER:
                continue
            scores[lw] += weight * (1.0 + min(len(lw), 12) / 12)  # longer words are rarer, on average
    return scores


def _chinese_keywords(query: str, text: str) -> dict[str, float]:
    runs = " ".join(_CJK_RUN.findall(query + " " + query + " " + text))
    if not runs:
        return {}
    tfidf, _ = _Jieba.load()
    out: defaultdict[str, float] = defaultdict(float)
    for word, weight in tfidf.extract_tags(runs, topK=10, withWeight=True, allowPOS=_CHINESE_TAG_POS):
        if len(word) >= 2 and word not in CHINESE_STOPWORDS:
            out[word] = float(weight)
    return out


def keywords(query: str, text: str, *, k: int = 5, min_quality: float = 0.0) -> list[str]:
    """Up to ``k`` keywords of a question and its answer, best first; with ``min_quality``,
    only those scoring at least that fraction of the best one (fewer, better tags)."""
    query, text = REDACTION_TOKEN.sub(" ", query), REDACTION_TOKEN.sub(" ", _FENCED.sub(" ", text))
    merged: defaultdict[str, float] = defaultdict(float)
    for scores in (_english_keywords(query, text), _chinese_keywords(query, text)):
        top = max(scores.values(), default=0.0)
        for word, s in scores.items():
            merged[word] += s / top  # each language's scores on [0, 1], so neither drowns the other
    best = max(merged.values(), default=0.0)
    ranked = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))
    return [w for w, s in ranked if s >= min_quality * best][:k]


_ENTITY = re.compile(r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|[A-Z]{2,}[0-9]*|[A-Z][0-9]+|[a-z_]\w*\.[a-z_][\w.]*[A-Za-z]"
                     r"|[A-Z][a-zA-Z0-9]+(?:\s+[A-Z][a-zA-Z0-9]+)*)")
# Words that open instructions and answers; capitalised at a sentence start, they are no names.
_SENTENCE_OPENERS = frozenset("""open click use run go see try add set check install make create note then also
    first next finally select enter type press choose start stop restart edit update remove delete call visit
    contact read write sure yes no ok okay here there this that these those it its if when while after before
    please remember make sure just simply now today tomorrow yesterday you we they he she i my our your their
    see let ask follow copy paste save load send reply answer sorry thanks hello hi dear draft summarize
    summarise explain describe tell show give find get fix debug implement generate build translate compose
    convert compare list keep avoid consider configure change move""".split())
_GREETINGS = frozenset({"hi", "hello", "hey", "dear", "thanks", "please"})
_ENTITY_FLAGS = frozenset({"nr", "ns", "nt", "nz", "nrt", "nrfg"})


def entities(text: str, *, limit: int = 10) -> list[str]:
    """Names in ``text``: Capitalised words not opening a sentence, acronyms, CamelCase, dotted
    identifiers, and jieba's names of people, places and organisations in Chinese."""
    text = REDACTION_TOKEN.sub(" ", text)
    found: dict[str, None] = {}
    for m in _ENTITY.finditer(text):
        words = m.group(0).split()
        start = m.start()
        while words and (words[0].lower() in ENGLISH_STOPWORDS or words[0].lower() in _GREETINGS):
            start += len(words.pop(0))  # "My Flask" -> "Flask", "Hi Bob" -> "Bob"
            start = text.index(words[0], start) if words else start
        if not words:
            continue
        name = " ".join(words)
        before = text[:start].rstrip(" \t")
        opens_sentence = not before or before[-1] in ".!?:\n。！？-*#>"
        if opens_sentence and words[0].lower() in _SENTENCE_OPENERS:
            # "Install", "Open Settings": the first word is capitalised only because a sentence starts.
            start = text.index(words[1], start + len(words[0])) if len(words) > 1 else start
            words = words[1:]
            if not words:
                continue
            name = " ".join(words)
        found.setdefault(name, None)
    if _CJK_RUN.search(text):
        _, posseg = _Jieba.load()
        for run in _CJK_RUN.findall(text):
            for pair in posseg.cut(run):
                if pair.flag in _ENTITY_FLAGS and len(pair.word) >= 2:
                    found.setdefault(pair.word, None)
    return list(found)[:limit]


class OfflineExtractor:
    """The default extractor: rules and word statistics, no model, deterministic.

    Confidence is not claimed (``None``): rules cannot judge it, and an admission rule that
    requires a minimum sees it as not stated. Importance neither, unless the user states it
    ("this is important", "这个很重要", "记住", "别忘了": :mod:`.importance`).

    Args:
        max_tags: at most this many tags.
        min_tag_quality: a tag is kept only when its score is at least this fraction of the
            best tag's, so a short exchange gets its one or two real keywords, not five.
        summary_chars: the summary is cut to this many characters.
    """

    def __init__(self, *, max_tags: int = 5, min_tag_quality: float = 0.4, summary_chars: int = 240) -> None:
        self.max_tags = max_tags
        self.min_tag_quality = min_tag_quality
        self.summary_chars = summary_chars

    def extract(self, query: str, response: str, *, content: ProcessedContent | None = None) -> Extraction:
        tags = keywords(query, response, k=self.max_tags, min_quality=self.min_tag_quality)
        if content is not None and content.type is ContentType.CODE and content.language:
            lang = content.language.lower()
            tags = [lang] + [t for t in tags if t != lang][: self.max_tags - 1]
        return Extraction(
            summary=summarize(query, response, content, max_chars=self.summary_chars),
            tags=tuple(tags),
            entities=tuple(entities(f"{query}\n{_FENCED.sub(' ', response)}")),
            intent=classify_intent(query, response),
            extra={"extractor": "offline"},
            importance=stated_importance(query),  # the user's words only: see .importance
        )
