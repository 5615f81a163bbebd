"""Small talk: turns that teach nothing, and are not stored.

A greeting or a thank-you answered in kind ("Thanks!" / "You're welcome!", "谢谢" / "不客气"),
or a request whose answer is only an acknowledgement ("Recommend a good sci-fi novel." /
"OK.", "推荐一本科幻小说" / "好的") holds no fact to remember: stored, it would come back for
any question that shares a word with it. A statement answered with an acknowledgement ("I
moved to Munich." / "OK.") is kept: the user said something. Only the conversation turn is
judged; a run that used tools is kept (its tools' outputs are memories of their own), and so
is a question with no answer yet (recurring questions are counted as patterns).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["is_small_talk"]

# Whole messages that only greet, thank, agree or acknowledge (compared without case,
# punctuation, emoji or spaces).
_ACKS = frozenset(
    "ok okay k kk sure yes yeah yep no nope alright allright right fine cool great nice good perfect awesome "
    "thanks thankyou thx ty thanksalot thankssomuch thankyouverymuch cheers gotit noted understood sounds good "
    "soundsgood willdo iwill illdoit okaythanks okthanks greatthanks youarewelcome youre welcome yourewelcome "
    "noproblem np anytime mypleasure hi hello hey heythere hiya goodmorning goodafternoon goodevening goodnight "
    "bye goodbye seeyou seeya later haha lol hmm ah oh wow "
    "好 好的 好吧 好啊 行 行吧 可以 嗯 嗯嗯 哦 噢 收到 明白 明白了 知道了 了解 懂了 没问题 对 是的 是 谢谢 谢谢你 多谢 感谢 "
    "辛苦了 不客气 不用谢 没关系 你好 您好 嗨 哈喽 早上好 早安 下午好 晚上好 晚安 再见 拜拜 回头见 哈哈 哈哈哈 呵呵".split())
# A message that asks for something: a question, or a request to recommend, find, tell...
_REQUEST = re.compile(
    r"[?？]\s*$|^\s*(?:please\s+)?(?:can|could|would|will)\s+you\b|^\s*(?:please\s+)?(?:recommend|suggest|tell|show|"
    r"find|give|list|name|help|write|explain|describe|summari[sz]e|translate)\b|^\s*(?:请|麻烦|帮我|给我|告诉我|推荐|"
    r"介绍|讲|说说|来)", re.IGNORECASE)


def _bare(text: str) -> str:
    """Lowercase letters and digits only (CJK characters are letters)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold()
                   if unicodedata.category(ch)[0] in "LN")


def _is_ack(text: str) -> bool:
    bare = _bare(text)
    return bare == "" or bare in _ACKS


def is_small_talk(query: str, response: str) -> bool:
    """True when a conversation turn teaches nothing: greetings, thanks and acknowledgements
    on both sides, or a request answered by an acknowledgement alone."""
    if not response.strip():  # an unanswered question is still a question asked (patterns count it)
        return _is_ack(query)
    if not _is_ack(response):
        return False
    return _is_ack(query) or bool(_REQUEST.search(query))
