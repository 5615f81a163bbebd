"""Working memory: the stored session buffer, its bounded rolling summary (extractive or by a
model, with a fallback) and get_conversation_context, across restarts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, InvalidInputError
from beeweave_core.lifecycle import LifecycleConfig, SessionConfig
from beeweave_core.lifecycle.sessions import count_tokens
from tests.lifecycle.lifecycle_support import DIM, Clock


def _open(path: Path | None, clock: Clock, **session: object) -> BeeWeave:
    return BeeWeave(path, embedder=HashingEmbedder(DIM), clock=clock,
                    lifecycle=LifecycleConfig(sessions=SessionConfig(**session)))  # type: ignore[arg-type]


def _turn(i: int) -> str:
    return f"Turn {i}: the restore of backup {i % 9} on cluster {i % 4} took {i + 3} minutes. Then we moved on."


def test_two_hundred_turns_keep_a_bounded_summary(tmp_path: Path) -> None:
    clock = Clock()
    m = _open(tmp_path / "s.db", clock, max_turns=8, summary_tokens=120)
    budgets = []
    for i in range(200):
        clock.advance(minutes=1)
        ctx = m.add_turn("chat", "user" if i % 2 == 0 else "assistant", _turn(i), user_id="u")
        budgets.append(count_tokens(ctx.summary))
        assert len(ctx.turns) == min(i + 1, 8) and ctx.total_turns == i + 1
        assert ctx.summarized_turns == max(i + 1 - 8, 0)
    assert max(budgets) <= 120 and budgets[-1] > 60  # bounded, and it does say something
    assert ctx.summarizer == "extractive"
    assert [t.content for t in ctx.turns] == [_turn(i) for i in range(192, 200)]
    # Every kept sentence is a sentence the conversation had (extractive, not invented).
    said = {s.strip() for i in range(200) for s in _turn(i).split(". ")}
    for piece in ctx.summary.split(". "):
        assert piece.strip().rstrip(".") in {s.rstrip(".") for s in said}
    m.close()
    again = _open(tmp_path / "s.db", clock, max_turns=8, summary_tokens=120)  # a restart keeps it all
    back = again.get_conversation_context("chat", 3, user_id="u")
    assert back.summary == ctx.summary and [t.content for t in back.turns] == [_turn(i) for i in (197, 198, 199)]
    assert back.total_turns == 200 and back.extra["hidden_turns"] == 5
    assert again.get_conversation_context("chat", 10, user_id="someone-else").total_turns == 0
    assert again.clear_session("chat", user_id="u") and again.get_conversation_context("chat", user_id="u").turns == ()
    again.close()


def test_a_model_writes_the_summary_within_budget_and_failures_fall_back() -> None:
    asked: list[str] = []

    def model(prompt: str) -> str:
        asked.append(prompt)
        if len(asked) == 2:
            raise RuntimeError("model down")
        return "The user restores backups nightly. " * 40  # too long: held to the budget

    m = _open(None, Clock(), max_turns=2, summary_tokens=30, summarizer=model)
    for i in range(3):
        ctx = m.add_turn("s", "user", _turn(i), user_id="u")
    assert ctx.summarizer == "model" and count_tokens(ctx.summary) <= 30
    assert ctx.summary.startswith("The user restores backups nightly.")
    assert "Turn 0" in asked[0] and "at most 30 words" in asked[0]
    ctx = m.add_turn("s", "assistant", _turn(3), user_id="u")  # the model raises: extractive, nothing lost
    assert ctx.summarizer == "extractive" and count_tokens(ctx.summary) <= 30 and ctx.summarized_turns == 2
    m.close()


def test_turns_are_redacted_and_checked() -> None:
    m = _open(None, Clock(), max_turns=4)
    ctx = m.add_turn("s", "user", "Mail me at dana@example.com please.", user_id="u")
    assert ctx.turns[0].content == "Mail me at [EMAIL] please."
    for bad in (dict(role="robot", content="x"), dict(role="user", content="  ")):
        with pytest.raises(InvalidInputError):
            m.add_turn("s", user_id="u", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        m.get_conversation_context("s", -1, user_id="u")
    assert m.get_conversation_context("s", user_id="u").total_turns == 1  # refused turns changed nothing
    with pytest.raises(InvalidInputError):
        SessionConfig(max_turns=0)
    m.close()


def test_chinese_turns_count_characters() -> None:
    assert count_tokens("上周讨论的备份问题 backup plan") == 11
    m = _open(None, Clock(), max_turns=1, summary_tokens=12)
    for text in ("我们讨论了数据库备份。", "备份每天凌晨执行。", "恢复需要十分钟。"):
        ctx = m.add_turn("s", "user", text, user_id="u")
    assert count_tokens(ctx.summary) <= 12 and "备份" in ctx.summary
    m.close()


def test_turns_from_several_processes_are_all_kept(reopen: Callable[..., BeeWeave]) -> None:
    """Two stores on the same data (as two processes or hosts have) append to one session at
    once: every turn is counted and the buffer holds the latest ones, none lost to a race."""
    import threading

    stores = [reopen(sessions=SessionConfig(max_turns=6, summary_tokens=80)) for _ in range(2)]

    def talk(m: BeeWeave, who: str) -> None:
        for i in range(20):
            m.add_turn("chat", "user", f"{who} says thing {i}.", user_id="u")

    threads = [threading.Thread(target=talk, args=(m, f"p{n}")) for n, m in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctx = stores[1].get_conversation_context("chat", window=6, user_id="u")
    assert ctx.total_turns == 40 and ctx.summarized_turns == 34 and len(ctx.turns) == 6
    said = [t.content for t in ctx.turns]
    assert said[-1] in {"p0 says thing 19.", "p1 says thing 19."}
    for who in ("p0", "p1"):  # each writer's turns in the order it wrote them
        mine = [int(x.rsplit(" ", 1)[1].rstrip(".")) for x in said if x.startswith(who)]
        assert mine == sorted(mine)
