"""Feedback attribution: only memories the answer drew on are "used"; the next turn and tool
results rate them."""

from __future__ import annotations

import pytest

from beeweave_core import InvalidInputError
from beeweave_core.lifecycle.attribution import (
    AttributionConfig,
    Reaction,
    drawn_on,
    reaction,
    reaction_signal,
    tool_failed,
    tool_text,
)
from beeweave_core.lifecycle.config import FeedbackSignal

MEMORIES = {"peanut": "Alice is allergic to peanuts", "deploy": "Deploy with make release on the build host",
            "cat": "Bob's cat is called Miso"}


def test_only_memories_whose_words_are_in_the_answer_count_as_used() -> None:
    answer = "Since Alice is allergic to peanuts, try an apple instead."
    assert drawn_on(MEMORIES, answer) == ["peanut"]
    assert drawn_on(MEMORIES, "I cannot help with that.") == []


def test_tool_calls_count_as_drawing_on_a_memory() -> None:
    calls = [tool_text("shell", {"cmd": "make release", "host": "build"})]
    assert drawn_on(MEMORIES, "Done.", calls) == ["deploy"]


def test_the_lexical_threshold_is_configurable() -> None:
    answer = "Alice should avoid nuts"  # one term of three ("alice") in common
    assert drawn_on(MEMORIES, answer) == []
    assert drawn_on(MEMORIES, answer, config=AttributionConfig(lexical=0.3)) == ["peanut"]


def _topic_vector(text: str) -> list[float]:
    """A toy embedding: which of a few topics the text mentions."""
    low = text.lower()
    return [float(any(w in low for w in words)) for words in (("cat", "miso", "kitten"), ("peanut", "nut"),
                                                               ("deploy", "release"))]


def test_semantic_overlap_counts_with_an_embedding_function() -> None:
    answer = "Your kitten sleeps a lot"  # no word of the cat memory, the same topic
    strict = AttributionConfig(lexical=1.0, semantic=0.9)
    assert drawn_on(MEMORIES, answer, config=strict) == []  # no embedding: words only
    assert drawn_on(MEMORIES, answer, embed=_topic_vector, config=strict) == ["cat"]


def test_chinese_memories_are_attributed_by_their_words() -> None:
    mems = {"zh": "用户对花生过敏", "other": "周五中午吃午饭"}
    assert drawn_on(mems, "因为你对花生过敏，建议吃苹果。") == ["zh"]


@pytest.mark.parametrize("text, want", [
    ("Thanks, that solved it!", Reaction.UP), ("谢谢，解决了", Reaction.UP), ("perfect", Reaction.UP),
    ("No, that's wrong.", Reaction.DOWN), ("不对", Reaction.DOWN), ("Thanks, but it didn't work", Reaction.DOWN),
    ("And then?", Reaction.INCOMPLETE), ("然后呢？", Reaction.INCOMPLETE),
    ("What is the weather tomorrow?", None), ("thanksgiving plans", None),
])
def test_the_next_turn_says_up_down_or_incomplete(text, want) -> None:
    assert reaction(text) is want


def test_cue_lists_and_the_incomplete_signal_are_configurable() -> None:
    assert reaction_signal("cheers mate") is None
    cfg = AttributionConfig(up_cues=("cheers",), incomplete_signal=FeedbackSignal.DOWN)
    assert reaction_signal("cheers mate", cfg) is FeedbackSignal.UP
    assert reaction_signal("然后呢", cfg) is FeedbackSignal.DOWN
    assert reaction_signal("然后呢") is None
    assert reaction_signal("that's wrong") is FeedbackSignal.DOWN


@pytest.mark.parametrize("output, error, failed", [
    ("ok", None, False), (None, "ValueError: bad", True), ({"exit_code": 0, "stdout": "done"}, None, False),
    ({"exit_code": 2}, None, True), ({"returncode": 1}, None, True), ("Process exited with code 1", None, True),
    ("exit code: 0\nall good", None, False), ("Error: file not found", None, True),
    ('Traceback (most recent call last):\n  File "x.py"', None, True), ({"status_code": 200}, None, False),
    ({"status_code": 500}, None, True), ("no errors found", None, False),
])
def test_tool_failures_are_read_from_errors_exit_codes_and_text(output, error, failed) -> None:
    assert tool_failed(output, error) is failed


@pytest.mark.parametrize("bad", [dict(lexical=1.5), dict(semantic=-0.1), dict(up_cues="thanks"),
                                 dict(down_cues=("",))])
def test_bad_config_is_rejected(bad) -> None:
    with pytest.raises(InvalidInputError):
        AttributionConfig(**bad)
