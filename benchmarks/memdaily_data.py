"""MemDaily loader and the retrieval measure defined in shared/data/memdaily/README.md.

The data's terms forbid copying it into this repository, so it is always read by path
(default: ``<repo>/../shared/data/memdaily``).

Measure (README): one memory scope (user) per file; every message of every trajectory of
the file is one memory (id = ``<file>:<tid>:<mid>``, content = the message, timestamp = its
time, no session); every question with a ``target_step_id`` is a query scoped to its file,
its gold memories ``<file>:<tid>:<mid>`` for each target; recall@k as on LoCoMo.

The shapes mirror ``locomo_data`` (``conv_id``/``turns``, ``dia_id``/``content``,
``question``/``evidence``) so that the LoCoMo peers and ``locomo_peers.run`` measure MemDaily
unchanged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


def _default_data_dir() -> Path:
    # <repo>/../shared/data/memdaily; from a git worktree nested one level deeper, the
    # nearest ancestor that has it.
    here = Path(__file__).resolve().parent.parent
    for parent in here.parents:
        candidate = parent / "shared" / "data" / "memdaily"
        if candidate.is_dir():
            return candidate
    return here.parent / "shared" / "data" / "memdaily"


DEFAULT_DATA_DIR = _default_data_dir()

# e.g. "2024年04月01日 周一 08:30": the weekday is redundant with the date.
_TIME = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日\s*(?:周.)?\s*(\d{1,2}):(\d{2})")


@dataclass(frozen=True)
class Message:
    conv_id: str  # the file's stem: the memory scope
    dia_id: str  # "<file>:<tid>:<mid>", the memory id
    timestamp: datetime
    content: str
    session: None = None  # MemDaily's trajectories of one file are unrelated: no session


@dataclass(frozen=True)
class Question:
    conv_id: str
    question: str
    evidence: tuple[str, ...]
    category: str  # the file's kind (simple_events, conditional_hybrid...)


@dataclass(frozen=True)
class UserFile:
    conv_id: str
    turns: list[Message]


def parse_time(text: str) -> datetime:
    m = _TIME.search(text)
    if m is None:
        raise ValueError(f"not a MemDaily time: {text!r}")
    y, mo, d, h, mi = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi)


def load_file(path: Path) -> tuple[UserFile, list[Question]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    file_id = path.stem
    kind = file_id.split("_", 1)[1]
    messages: list[Message] = []
    questions: list[Question] = []
    for traj in data:
        tid = traj["tid"]
        for msg in traj["message_list"]:
            messages.append(Message(file_id, f"{file_id}:{tid}:{msg['mid']}", parse_time(msg["time"]), msg["message"]))
        for qa in traj["question_list"]:
            if qa.get("target_step_id"):
                questions.append(Question(file_id, qa["question"],
                                          tuple(f"{file_id}:{tid}:{mid}" for mid in qa["target_step_id"]), kind))
    return UserFile(file_id, messages), questions


def load_memdaily(data_dir: Path = DEFAULT_DATA_DIR,
                  only: list[str] | None = None) -> tuple[list[UserFile], list[Question]]:
    """All files (sorted by name) and their questions; ``only``: file stems to keep."""
    paths = sorted(Path(data_dir).glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no MemDaily *.json files in {data_dir}")
    if only is not None:
        paths = [p for p in paths if p.stem in only]
    files: list[UserFile] = []
    questions: list[Question] = []
    for path in paths:
        f, qs = load_file(path)
        files.append(f)
        questions.extend(qs)
    return files, questions
