"""PII redaction gaps a user trial found: ID numbers written in groups, and landline numbers.

Each positive case names the kind it must be counted as; the near-misses (dates, times,
amounts, versions, ports, LoCoMo ids, ordinary numbers in Chinese sentences...) must come
out exactly as they went in, as they did before these rules were widened.
"""

from __future__ import annotations

from collections import Counter

import pytest

from beeweave_core.ingest import Redactor
from beeweave_core.ingest.redact import cn_id_valid

R = Redactor()


def redact(text: str) -> tuple[str, dict[str, int]]:
    counts: Counter[str] = Counter()
    return R.redact(text, counts), dict(counts)


def test_the_ids_used_below_have_a_valid_check_digit() -> None:
    for number in ("11010519491231002X", "440305198511202816", "31011519770812002X"):
        assert cn_id_valid(number)
    # The trial's own example "110101 19900307 123X" has a wrong check digit (it would be 3):
    # it stays, like the same digits written without spaces (see the near-misses).
    assert not cn_id_valid("11010119900307123X")


@pytest.mark.parametrize("text, expected", [
    # Chinese resident IDs in the groupings people write them in: region-birth date-rest,
    # groups of four, region-year-month/day-rest; spaces or hyphens; with a lower-case x.
    ("身份证号110105 19491231 002X，请核对", "身份证号[ID]，请核对"),
    ("id 1101 0519 4912 3100 2X ok", "id [ID] ok"),
    ("id 110105-19491231-002X.", "id [ID]."),
    ("id 110105 1949 1231 002x", "id [ID]"),
    ("身份证：440305 19851120 2816。", "身份证：[ID]。"),
    ("证件号 3101 1519 7708 1200 2X", "证件号 [ID]"),
    # Full-width digits and the ideographic space, as a Chinese input method types them.
    ("身份证１１０１０５　１９４９１２３１　００２Ｘ", "身份证[ID]"),
    # A US SSN: hyphens were handled, spaces were not.
    ("SSN 078 05 1120", "SSN [ID]"),
    ("社保号 219 09 9999，", "社保号 [ID]，"),
])
def test_grouped_ids_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == (expected, {"national_id": 1})


@pytest.mark.parametrize("text, expected", [
    # Chinese landlines: area code 010, 02x or 0xxx, then a 7- or 8-digit number.
    ("电话010-12345678", "电话[PHONE]"),
    ("座机 0755-8765 4321。", "座机 [PHONE]。"),
    ("(021) 5555 1234", "[PHONE]"),
    ("打021-55551234转123找我", "打[PHONE]找我"),
    ("fax 010 1234 5678", "fax [PHONE]"),
    ("总机0571-8888666 分机 806", "总机[PHONE]"),
    ("（０２１）５５５５　１２３４", "[PHONE]"),
    ("tel 020-8765432, thanks", "tel [PHONE], thanks"),
    ("(0755)87654321", "[PHONE]"),
    # North American numbers: the forms that were missed.
    ("(415) 555 0100", "[PHONE]"),
    ("call 415 555 0100 now", "call [PHONE] now"),
    ("toll-free 1-800-555-0100", "toll-free [PHONE]"),
    ("desk 415-555-0100 ext. 23", "desk [PHONE]"),
    ("desk (415) 555-0100 x23.", "desk [PHONE]."),
    ("+1 415 555 0100 ext. 2301", "[PHONE]"),
    ("+86 10 1234 5678转8001", "[PHONE]"),
])
def test_landlines_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == (expected, {"phone": 1})


@pytest.mark.parametrize("text", [
    # These were redacted before the change; they must stay redacted the same way.
    "+1 415 555 0100",
    "(415) 555-0100",
    "+44 20 7946 0958",
    "+86 10 1234 5678",
    "+86 (0)10 1234 5678",
    "138 1234 5678",
    "+86 138-1234-5678",
])
def test_phone_forms_already_handled_still_are(text: str) -> None:
    assert redact(f"tel {text}.") == ("tel [PHONE].", {"phone": 1})


@pytest.mark.parametrize("text, expected, kind", [
    ("card 3782 822463 10005", "card [CARD]", "bank_card"),  # already handled: grouped cards
    ("card 4111-1111-1111-1111", "card [CARD]", "bank_card"),
    ("id 11010519491231002X", "id [ID]", "national_id"),  # contiguous: unchanged
    ("SSN 078-05-1120", "SSN [ID]", "national_id"),
])
def test_forms_already_handled_are_unchanged(text: str, expected: str, kind: str) -> None:
    assert redact(text) == (expected, {kind: 1})


@pytest.mark.parametrize("text", [
    # Grouped digits that are not a valid ID: wrong check digit, impossible date.
    "110101 19900307 123X",
    "1101 0119 9003 0712 3X",
    "110105 19491331 0029",
    "000 12 3456",  # not a valid SSN area
    "078 05 1120 99",  # part of a longer run of numbers
    "lot 12 078 05 1120",
    "0755 614363 19050922 6010 2026",  # a valid ID's digits, but inside a run of numbers
    # Spaced groups next to a date are a list of numbers, not a phone.
    "469 548 1991-11-21", "0798 3617 1993-07-18", "0305 20240315",
    # Dates, times, durations.
    "2024-03-15", "2024 03 15", "20240315", "2024/03/15", "2024年3月15日", "15.03.2024",
    "2024-03-15 10:30:00", "10:30", "10:30-11:45", "0930-1130", "meeting 09:30 to 11:00",
    "from 2024-03-15 to 2024-04-15", "03-15-2024", "1990-2024",
    # Amounts.
    "¥12,345.67", "$1,234,567.89", "1 234 567 890 RMB", "共计12345元", "价格 0755 元",
    # Versions, ports, ISBNs, hashes.
    "1.2.3", "v2.10.4", "python 3.11.4", "localhost:8080", "port 5432", "ISBN 978-7-111-54742-6",
    # Years and counts.
    "in 2024 we", "1990年出生", "100 200 3000", "123 456 7890",
    # LoCoMo dialogue ids.
    "D1:3", "see D12:34 and D3:15", "session_1 dia D2:10",
    # Ordinary numbers in Chinese sentences.
    "我买了3台", "订单号1001", "订单号 20240315001", "第2024号文件", "房间 0203", "邮编100101",
    # Near-miss landlines: no valid area code, a number starting with 0, too few digits.
    "0123-4567890", "010-0123456", "010-123456", "05-12-2024", "012 3456 7890", "01012345678",
])
def test_near_misses_are_left_alone(text: str) -> None:
    assert redact(text) == (text, {})


def test_ip_addresses_are_redacted_as_before() -> None:
    assert redact("server 192.168.1.10:8080 down") == ("server [IP]:8080 down", {"ip_address": 1})


def test_grouped_ids_and_landlines_in_json_keep_it_parseable() -> None:
    out, counts = redact('{"id": "110105 19491231 002X", "tel": "(021) 5555 1234", "n": 3}')
    assert out == '{"id": "[ID]", "tel": "[PHONE]", "n": 3}'
    assert counts == {"national_id": 1, "phone": 1}


def test_a_second_pass_changes_nothing() -> None:
    once, _ = redact("ID 1101 0519 4912 3100 2X, 座机0755-8765 4321转12, cell (415) 555 0100")
    assert once == "ID [ID], 座机[PHONE], cell [PHONE]"
    assert redact(once) == (once, {})
