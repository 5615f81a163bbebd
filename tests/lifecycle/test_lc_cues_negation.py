"""Implicit feedback cues respect negation and questions; tool errors are read from error labels
(English and Chinese), not from the bare word "Error" at the start of ordinary text."""

from __future__ import annotations

import pytest

from beeweave_core.lifecycle.attribution import AttributionConfig, reaction_signal, tool_failed
from beeweave_core.lifecycle.config import FeedbackSignal

UP, DOWN = FeedbackSignal.UP, FeedbackSignal.DOWN


@pytest.mark.parametrize("text", [
    "没有用，还是报错", "一点都没有用", "不好了，服务又挂了", "这个方案不完美，有问题", "解决了吗？", "解决了吗",
    "可以了吗？还没好", "not perfect at all", "no thanks, that's not it", "Is it solved?", "thanks?",
    "it's not perfect", "that never worked",
])
def test_a_negated_or_asked_thank_you_is_not_up(text) -> None:
    assert reaction_signal(text) is not UP


@pytest.mark.parametrize("text", ["没有用，还是报错", "继续报错", "没解决", "谢谢，但是不对", "Thanks, but it didn't work",
                                  "nope, still failing"])
def test_a_correction_wins_over_a_thank_you(text) -> None:
    assert reaction_signal(text) is DOWN


@pytest.mark.parametrize("text", ["谢谢", "解决了", "thanks", "that fixed it", "Thanks, that solved it!", "谢谢，解决了",
                                  "不错，谢谢", "非常有用", "太好了", "perfect", "It works now. Any other tips?"])
def test_plain_thanks_still_count_up(text) -> None:
    assert reaction_signal(text) is UP


@pytest.mark.parametrize("text", ["不对", "that's wrong", "错了", "No, that's wrong."])
def test_corrections_still_count_down(text) -> None:
    assert reaction_signal(text) is DOWN


def test_configured_cues_get_the_same_negation_rules() -> None:
    cfg = AttributionConfig(up_cues=("cheers", "赞"))
    assert reaction_signal("cheers mate", cfg) is UP
    assert reaction_signal("no cheers from me", cfg) is None
    assert reaction_signal("赞", cfg) is UP
    assert reaction_signal("不赞", cfg) is None


@pytest.mark.parametrize("output", [
    "错误：连接被拒绝", "错误: 文件不存在", "报错：timeout", "执行失败：超时", "异常：空指针", "出错：磁盘已满", "【错误】：x",
    "无法连接到服务器", "连接被拒绝", "Error: connection refused", "error: x", "ERROR connection refused",
    "[error] disk full", "ValueError: bad", "Exception: boom", "fatal: not a git repository",
    'Traceback (most recent call last):\n  File "x.py"', "Process exited with code 1",
])
def test_error_labels_are_failures(output) -> None:
    assert tool_failed(output) is True


@pytest.mark.parametrize("output", [
    "Error rate dropped to 0.1% after the fix", "exception handling is documented in chapter 3",
    "Errors are logged to /var/log/app.log", "no errors found", "没有错误：一切正常", "失败次数：0", "报错信息为空",
    "错误率下降到 0.1%", "ok",
])
def test_ordinary_text_mentioning_errors_is_not_a_failure(output) -> None:
    assert tool_failed(output) is False
