"""Normalization: each content type, its language or payload, and the raw text kept."""

from __future__ import annotations

import pytest

from beeweave_core import ContentType
from beeweave_core.ingest import normalize


def test_plain_text_stays_text() -> None:
    pc = normalize("The user prefers answers in Chinese. Keep them short.")
    assert pc.type is ContentType.TEXT and pc.language is None and pc.payload is None
    assert pc.text == "The user prefers answers in Chinese. Keep them short."


def test_chinese_text_is_text() -> None:
    assert normalize("用户对花生过敏，请记住。").type is ContentType.TEXT


def test_fenced_code_keeps_its_language_and_the_prose() -> None:
    text = "Use this:\n```python\ndef add(a, b):\n    return a + b\n```\nand call add(1, 2)."
    pc = normalize(text)
    assert pc.type is ContentType.CODE and pc.language == "python"
    assert pc.text == text  # prose and code both stay searchable
    assert pc.payload == {"blocks": [{"language": "python", "code": "def add(a, b):\n    return a + b"}]}


def test_fence_without_a_language_is_detected() -> None:
    pc = normalize("```\nconst x = 1;\nconsole.log(x);\n```")
    assert pc.type is ContentType.CODE and pc.language == "javascript"


@pytest.mark.parametrize("code, language", [
    ("import os\n\ndef main():\n    print(os.getcwd())\n\nif __name__ == '__main__':\n    main()", "python"),
    ("const total = items.reduce((a, b) => a + b, 0);\nconsole.log(total);", "javascript"),
    ("#include <iostream>\nint main() {\n  std::cout << 1;\n}", "cpp"),
    ("package main\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}", "go"),
    ("SELECT name, age FROM users WHERE age > 30", "sql"),
])
def test_unfenced_code_is_detected_with_its_language(code: str, language: str) -> None:
    pc = normalize(code)
    assert pc.type is ContentType.CODE and pc.language == language


def test_json_becomes_data_with_the_parsed_payload_and_readable_text() -> None:
    pc = normalize('{"city": "Paris", "forecast": {"temp": 21, "sky": "sunny"}, "alerts": ["uv"]}')
    assert pc.type is ContentType.DATA and pc.language == "json"
    assert pc.payload == {"city": "Paris", "forecast": {"temp": 21, "sky": "sunny"}, "alerts": ["uv"]}
    assert pc.text.splitlines() == ["city: Paris", "forecast.temp: 21", "forecast.sky: sunny", "alerts[0]: uv"]


def test_markdown_table_becomes_rows() -> None:
    pc = normalize("Prices:\n\n| item | price |\n|---|---:|\n| tea | 3 |\n| coffee | 4 |\n")
    assert pc.type is ContentType.DATA and pc.language == "markdown"
    assert pc.payload == [{"item": "tea", "price": "3"}, {"item": "coffee", "price": "4"}]


def test_csv_and_tsv_become_rows() -> None:
    csv = normalize("name,age,city\nAlice,30,Paris\nBob,25,Berlin")
    assert csv.type is ContentType.DATA and csv.language == "csv"
    assert csv.payload[1] == {"name": "Bob", "age": "25", "city": "Berlin"}
    tsv = normalize("a\tb\n1\t2\n3\t4")
    assert tsv.type is ContentType.DATA and tsv.language == "tsv"


@pytest.mark.parametrize("text", [
    "Hello, world\nGood morning, Alice\nSee you, Bob",  # commas in prose are not a table
    "If you want to learn Python, start with the tutorial.\nThen read the docs.",
    "[1] is a citation, not JSON",
    "{not json}",
    "Note: x = 1 in the example above.",
])
def test_near_misses_stay_text(text: str) -> None:
    assert normalize(text).type is ContentType.TEXT


def test_empty_text() -> None:
    assert normalize("   ").type is ContentType.TEXT
