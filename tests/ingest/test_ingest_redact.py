"""PII redaction: every kind is replaced, near-misses are left alone."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from beeweave_core import InvalidInputError
from beeweave_core.ingest import PiiKind, PiiPattern, Redactor
from beeweave_core.ingest.redact import cn_id_valid, luhn_valid

R = Redactor()


def redact(text: str) -> tuple[str, dict[str, int]]:
    counts: Counter[str] = Counter()
    return R.redact(text, counts), dict(counts)


@pytest.mark.parametrize("text, expected, kind", [
    ("write to alice.smith+news@example.co.uk today", "write to [EMAIL] today", "email"),
    ("邮箱是zhang.san@qq.com。", "邮箱是[EMAIL]。", "email"),
    ("手机13812345678，", "手机[PHONE]，", "phone"),
    ("call 138-1234-5678 or 138 1234 5678", "call [PHONE] or [PHONE]", "phone"),
    ("+86 139 0000 1111", "[PHONE]", "phone"),
    ("ring +1 (415) 555-2671", "ring [PHONE]", "phone"),
    ("office +44 20 7946 0958.", "office [PHONE].", "phone"),
    ("US line (415) 555-2671 or 415-555-2671", "US line [PHONE] or [PHONE]", "phone"),
    ("身份证号11010519491231002X，请核对", "身份证号[ID]，请核对", "national_id"),
    ("id 11010519491231002x", "id [ID]", "national_id"),
    ("SSN 078-05-1120", "SSN [ID]", "national_id"),
    ("card 4111 1111 1111 1111 exp 12/27", "card [CARD] exp 12/27", "bank_card"),
    ("card 4111-1111-1111-1111", "card [CARD]", "bank_card"),
    ("amex 378282246310005", "amex [CARD]", "bank_card"),
    ("mc 5500000000000004.", "mc [CARD].", "bank_card"),
    ("server 192.168.1.10:8080 down", "server [IP]:8080 down", "ip_address"),
    ("from 2001:db8::ff00:42:8329 and fe80::1", "from [IP] and [IP]", "ip_address"),
    ("full 2001:0db8:85a3:0000:0000:8a2e:0370:7334", "full [IP]", "ip_address"),
    ("key sk-proj-Abc123def456ghi789jkl012mno", "key [SECRET]", "secret"),
    ("aws AKIAIOSFODNN7EXAMPLE", "aws [SECRET]", "secret"),
    ("gh ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ12", "gh [SECRET]", "secret"),
    ("Authorization: Bearer abcdef1234567890abcdef.xyz", "Authorization: Bearer [SECRET]", "secret"),
    ("password=hunter2 and secret: 'open sesame'", "password=[SECRET] and secret: '[SECRET]'", "secret"),
    ('{"api_key": "abc123"}', '{"api_key": "[SECRET]"}', "secret"),
    ("token Zx8Qp2LmN4vR7tY1wK9sD3fG6hJ0aB5cEq", "token [SECRET]", "secret"),
    ("blob Zx8Qp2LmN4vR7tY1wK9sD3fG6hJ0aB5cEq end", "blob [SECRET] end", "secret"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "[SECRET]", "secret"),
])
def test_each_kind_is_redacted(text: str, expected: str, kind: str) -> None:
    out, counts = redact(text)
    assert out == expected
    assert set(counts) == {kind}


@pytest.mark.parametrize("text", [
    "4111 1111 1111 1112",  # fails Luhn
    "4111111111111112",  # fails Luhn, contiguous
    "110105194912310021",  # Chinese ID shape, wrong check digit
    "110105194913310029",  # month 13
    "12345678901",  # 11 digits but not a Chinese mobile (12x)
    "1700000000000",  # epoch milliseconds
    "order 2024-06-01 shipped",
    "000-12-3456",  # not a valid SSN area
    "v1.2.3.4",
    "version 1.2.3.4",
    "10.0.0.256",  # not an IPv4 address
    "meeting at 12:30:45",
    "std::vector<int> and a::b",
    "user@localhost or @handle",
    "git 3f786850e387550fdab836ed7e6dc881de23001b",  # hex digests name things
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "ThisIsAVeryLongJavaClassNameFactory2Builder",  # long identifier made of words
    "reset the password please",  # no assignment
    "max_tokens: 100",
    "sk-learn is a typo",
    "Basic arithmetic and token limits",
])
def test_near_misses_are_left_alone(text: str) -> None:
    assert redact(text) == (text, {})


def test_earlier_rules_win_so_a_secret_is_one_secret() -> None:
    assert redact("password=13812345678") == ("password=[SECRET]", {"secret": 1})


def test_bare_numbers_in_json_are_quoted_so_the_json_still_parses() -> None:
    out, counts = redact('{"card": 4111111111111111, "phone": 13812345678, "n": 3}')
    assert json.loads(out) == {"card": "[CARD]", "phone": "[PHONE]", "n": 3}
    assert counts == {"bank_card": 1, "phone": 1}


def test_values_are_redacted_recursively_and_secret_keys_whole() -> None:
    value = {"to": ["a@b.io", "c@d.org"], "card": 4111111111111111, "password": "x", "n": 7, "ok": True,
             "nested": {"token": 12345, "note": "ip 10.1.2.3"}}
    counts: Counter[str] = Counter()
    out = R.redact_value(value, counts)
    assert out == {"to": ["[EMAIL]", "[EMAIL]"], "card": "[CARD]", "password": "[SECRET]", "n": 7, "ok": True,
                   "nested": {"token": "[SECRET]", "note": "ip [IP]"}}
    assert counts == {"email": 2, "bank_card": 1, "secret": 2, "ip_address": 1}
    assert value["password"] == "x"  # the input is not changed


def test_trees_of_any_depth_are_redacted_without_recursion() -> None:
    value = {"to": ["a@b.io", ("c@d.org", 4111111111111111)], "password": "x", "ok": True, "n": None,
             "nested": {"token": 12345, "note": "ip 10.1.2.3"}}
    counts: Counter[str] = Counter()
    out = R.redact_tree(value, counts)
    assert out == {"to": ["[EMAIL]", ["[EMAIL]", "[CARD]"]], "password": "[SECRET]", "ok": True, "n": None,
                   "nested": {"token": "[SECRET]", "note": "ip [IP]"}}
    assert counts == {"email": 2, "bank_card": 1, "secret": 2, "ip_address": 1}
    assert value["password"] == "x"  # the input is not changed
    deep: dict = {"mail": "z@y.cn"}
    for _ in range(5000):  # far deeper than the interpreter's recursion limit
        deep = {"k": [deep]}
    node = R.redact_tree(deep)
    for _ in range(5000):
        node = node["k"][0]
    assert node == {"mail": "[EMAIL]"}
    assert R.redact_tree("call 13812345678") == "call [PHONE]" and R.redact_tree(7) == 7
    assert Redactor(enabled=False).redact_tree({"m": "z@y.cn"}) == {"m": "z@y.cn"}


def test_custom_patterns_run_first_with_their_own_token() -> None:
    r = Redactor(custom=[PiiPattern("employee_id", r"EMP-\d{6}"),
                         PiiPattern("ticket", r"T\d{4}", replacement="<ticket>", validate=lambda s: s != "T0000")])
    counts: Counter[str] = Counter()
    assert r.redact("EMP-123456 filed T1234 and T0000", counts) == "[EMPLOYEE_ID] filed <ticket> and T0000"
    assert counts == {"employee_id": 1, "ticket": 1}


def test_kinds_can_be_chosen_and_redaction_turned_off() -> None:
    only_mail = Redactor(kinds=[PiiKind.EMAIL])
    assert only_mail.redact("a@b.io 13812345678") == "[EMAIL] 13812345678"
    off = Redactor(enabled=False)
    assert off.redact("a@b.io") == "a@b.io" and off.redact_value({"password": "x"}) == {"password": "x"}


def test_bad_custom_patterns_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        Redactor(custom=[PiiPattern("bad", "(")])
    with pytest.raises(InvalidInputError):
        Redactor(kinds=["passport"])


def test_check_digit_helpers() -> None:
    assert cn_id_valid("11010519491231002X") and not cn_id_valid("110105194912310021")
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")


def test_redacted_text_is_stable_under_a_second_pass() -> None:
    once, _ = redact("mail a@b.io, card 4111 1111 1111 1111, password=x, ip 8.8.8.8")
    assert redact(once) == (once, {})
    assert not re.search(r"\d{4} \d{4}", once)


@pytest.mark.parametrize("text, expected", [
    # Full-width forms, as Chinese input methods type them (a user trial found them stored as is,
    # and an ASCII search for the number found the memory).
    ("手机１３８１２３４５６７８", "手机[PHONE]"),
    ("邮箱ａｌｉｃｅ＠ｅｘａｍｐｌｅ．ｃｏｍ，谢谢", "邮箱[EMAIL]，谢谢"),
    ("卡号４１１１１１１１１１１１１１１１", "卡号[CARD]"),
    ("全角ＡＢＣ１２３不是个人信息", "全角ＡＢＣ１２３不是个人信息"),  # kept as written, not folded
    # Secrets labelled in Chinese.
    ("密码是Hunter2Secret", "密码是[SECRET]"),
    ("数据库密码：hunter2，明天改", "数据库密码：[SECRET]，明天改"),
    ("口令: P@ssw0rd123", "口令: [SECRET]"),
    ("我的密码是什么？", "我的密码是什么？"),  # a question keeps its words
])
def test_full_width_personal_data_and_chinese_secret_labels(text: str, expected: str) -> None:
    assert Redactor().redact(text) == expected
