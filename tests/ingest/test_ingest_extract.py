"""Extraction: the offline default and the LLM extractor with fake LangChain and LlamaIndex models."""

from __future__ import annotations

import json
from typing import Any

import pytest

from beeweave_core import ContentType, Intent, InvalidInputError
from beeweave_core.ingest import Extraction, LLMExtractor, OfflineExtractor, normalize
from beeweave_core.ingest.extract import classify_intent

X = OfflineExtractor()


@pytest.mark.parametrize("query, intent", [
    ("How do I reset my password?", Intent.INFORMATION_QUERY),
    ("What is the capital of France?", Intent.INFORMATION_QUERY),
    ("Write a Python function that parses ISO dates", Intent.CODE_GENERATION),
    ("Implement a retry decorator in TypeScript", Intent.CODE_GENERATION),
    ("Draft an email to my manager about the delay", Intent.DOCUMENT_WRITING),
    ("Summarize this article in three bullet points", Intent.DOCUMENT_WRITING),
    ("My Flask app crashes with KeyError on login", Intent.PROBLEM_DIAGNOSIS),
    ("Why does my build not finish?", Intent.PROBLEM_DIAGNOSIS),
    ("如何重置我的密码？", Intent.INFORMATION_QUERY),
    ("帮我写一个Python函数计算斐波那契数列", Intent.CODE_GENERATION),
    ("帮我写一封邮件给客户说明延期", Intent.DOCUMENT_WRITING),
    ("程序报错了，无法连接数据库", Intent.PROBLEM_DIAGNOSIS),
    ("Thanks!", Intent.OTHER),
])
def test_intent_rules_in_english_and_chinese(query: str, intent: Intent) -> None:
    assert classify_intent(query) is intent


def test_offline_extraction_of_a_text_answer() -> None:
    e = X.extract("How do I reset my password?",
                  "Open Settings, then Security, and click Reset password. Acme Corp sends a confirmation e-mail.")
    assert isinstance(e, Extraction)
    assert e.summary == "Open Settings, then Security, and click Reset password."
    assert 3 <= len(e.tags) <= 5 and {"password", "reset"} <= set(e.tags)
    assert "Acme Corp" in e.entities and "Settings" in e.entities
    assert e.intent is Intent.INFORMATION_QUERY and e.extra["extractor"] == "offline"


def test_offline_extraction_of_code_names_the_language() -> None:
    answer = "```python\ndef add(a, b):\n    return a + b\n```"
    e = X.extract("Write a Python function that adds two numbers", answer, content=normalize(answer))
    assert e.summary == "Python code for: Write a Python function that adds two numbers"
    assert e.tags[0] == "python" and e.intent is Intent.CODE_GENERATION


def test_offline_extraction_of_data() -> None:
    answer = '{"city": "Paris", "temp": 21}'
    e = X.extract("weather in Paris", answer, content=normalize(answer))
    assert e.summary.startswith("Data with fields city, temp")


def test_offline_extraction_in_chinese_uses_jieba() -> None:
    e = X.extract("如何重置我的密码？", "打开设置，进入安全页面，点击重置密码。张三在北京的阿里巴巴公司工作。")
    assert e.summary.startswith("打开设置")
    assert "密码" in e.tags and "重置" in e.tags
    assert {"张三", "北京", "阿里巴巴公司"} <= set(e.entities)


def test_redaction_tokens_are_never_keywords_or_entities() -> None:
    e = X.extract("send it to [EMAIL] about the invoice", "Sent the invoice to [EMAIL] and [PHONE].")
    assert not {"email", "phone", "EMAIL", "PHONE"} & (set(e.tags) | set(e.entities))


# -- the LLM extractor -------------------------------------------------------------------------
GOOD = {"summary": "Reset the password in Settings.", "tags": ["password", "reset", "settings"],
        "entities": ["Settings"], "intent": "information_query"}


def test_langchain_chat_model_answering_json_text() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    llm = FakeListChatModel(responses=["Sure! ```json\n" + json.dumps(GOOD) + "\n```"])
    e = LLMExtractor(llm).extract("How do I reset my password?", "Settings > Security.")
    assert e == Extraction("Reset the password in Settings.", ("password", "reset", "settings"), ("Settings",),
                           Intent.INFORMATION_QUERY, {"extractor": "llm"})


def test_langchain_structured_output_is_used_when_offered() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.runnables import RunnableLambda

    asked: list[Any] = []

    class Structured(GenericFakeChatModel):
        def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
            asked.append(schema)
            return RunnableLambda(lambda prompt: dict(GOOD, intent="code generation", tags=["one"]))

    e = LLMExtractor(Structured(messages=iter([]))).extract("Write a parser", "def parse(): ...")
    assert asked and asked[0]["title"] == "KnowledgeExtraction"
    assert e.intent is Intent.CODE_GENERATION  # "code generation" read as the enum
    assert e.tags[0] == "one" and len(e.tags) == 3  # completed to three from the text's keywords


@pytest.mark.parametrize("reply", ["I cannot help with that.", "{broken json", json.dumps({"tags": ["x"]})])
def test_langchain_bad_answers_fall_back_to_the_offline_extractor(reply: str) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    ext = LLMExtractor(FakeListChatModel(responses=[reply]))
    e = ext.extract("How do I reset my password?", "Open Settings and click Reset password.")
    assert e.extra == {"extractor": "offline", "fallback_from": "llm"}
    assert e.summary == "Open Settings and click Reset password."
    assert ext.failures == 1 and ext.last_error


def test_a_model_that_raises_falls_back() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    class Down(FakeListChatModel):
        def invoke(self, *a: Any, **k: Any) -> Any:
            raise ConnectionError("model server down")

    ext = LLMExtractor(Down(responses=["unused"]))
    e = ext.extract("What is BM25?", "A ranking function.")
    assert e.extra["fallback_from"] == "llm" and "ConnectionError" in ext.last_error


@pytest.mark.slow
def test_llamaindex_custom_llm_answering_json() -> None:
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata

    class JsonLLM(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="json-llm")

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            assert "Question:" in prompt
            return CompletionResponse(text=json.dumps(dict(GOOD, intent="problem_diagnosis")))

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            raise NotImplementedError

    e = LLMExtractor(JsonLLM()).extract("Why does login fail?", "The token expired.")
    assert e.intent is Intent.PROBLEM_DIAGNOSIS and e.extra == {"extractor": "llm"}


def test_llamaindex_mock_llm_echo_falls_back() -> None:
    from llama_index.core.llms import MockLLM

    e = LLMExtractor(MockLLM()).extract("What is BM25?", "A ranking function for search.")
    assert e.extra["fallback_from"] == "llm" and e.summary == "A ranking function for search."


def test_a_plain_function_is_a_model_too() -> None:
    e = LLMExtractor(lambda prompt: json.dumps(GOOD)).extract("q", "a")
    assert e.summary == GOOD["summary"]


def test_something_that_is_not_a_model_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        LLMExtractor(42)


def test_the_fallback_can_be_any_extractor() -> None:
    class Fixed:
        def extract(self, query: str, response: str, *, content: Any = None) -> Extraction:
            return Extraction("fixed", ("a", "b", "c"), (), Intent.OTHER, {"extractor": "fixed"})

    e = LLMExtractor(lambda p: "no json", fallback=Fixed()).extract("q", "a")
    assert e.summary == "fixed" and e.extra == {"extractor": "fixed", "fallback_from": "llm"}


def test_code_content_type_reaches_the_extractor() -> None:
    seen = []

    class Spy:
        def extract(self, query: str, response: str, *, content: Any = None) -> Extraction:
            seen.append(content.type)
            return X.extract(query, response, content=content)

    LLMExtractor(lambda p: "nope", fallback=Spy()).extract("q", "```sql\nSELECT 1\n```", content=normalize("```sql\nSELECT 1\n```"))
    assert seen == [ContentType.CODE]
