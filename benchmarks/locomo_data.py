"""LoCoMo loader and the retrieval measure defined in shared/data/locomo/README.md.

The data's licence forbids copying it into this repository, so it is always read by path
(default: ``<repo>/../shared/data/locomo``).

Measure (README): one scope per conversation, one memory per turn (id = dia_id); queries are
the category 1-4 questions with evidence; recall@k = share of a question's evidence ids found
in the top k, averaged over questions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"

# Category 5 (adversarial) has no answer in the conversation, so it is not a retrieval query.
QUERY_CATEGORIES = frozenset({1, 2, 3, 4})

_SESSION_KEY = re.compile(r"session_(\d+)")
# e.g. "1:56 pm on 8 May, 2023"
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True)
class Turn:
    conv_id: str
    dia_id: str  # e.g. "D3:7"; the memory id
    session: int
    timestamp: datetime  # the session's date; turns carry no time of their own
    speaker: str
    content: str  # "Speaker: text" [+ " [shares <blip_caption>]"]


@dataclass(frozen=True)
class Question:
    conv_id: str
    question: str
    category: int
    evidence: tuple[str, ...]  # dia_ids as given in the data, malformed ones included


@dataclass(frozen=True)
class Conversation:
    conv_id: str
    turns: list[Turn]


def _turn_content(raw: dict[str, object]) -> str:
    content = f"{raw['speaker']}: {raw['text']}"
    caption = raw.get("blip_caption")
    if caption:
        # The photo's caption is often what a question asks about ("what did X paint?").
        content += f" [shares {caption}]"
    return content


def load_conversation(path: Path) -> tuple[Conversation, list[Question]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    conv_id = path.stem
    turns: list[Turn] = []
    # Files also hold session_N_date_time for sessions with no turns; only session_N lists count.
    sessions = sorted(
        (int(m.group(1)), key) for key in data if (m := _SESSION_KEY.fullmatch(key))
    )
    for number, key in sessions:
        timestamp = datetime.strptime(data[f"{key}_date_time"], _DATE_FORMAT)
        for raw in data[key]:
            turns.append(
                Turn(
                    conv_id=conv_id,
                    dia_id=raw["dia_id"],
                    session=number,
                    timestamp=timestamp,
                    speaker=raw["speaker"],
                    content=_turn_content(raw),
                )
            )
    questions = [
        Question(
            conv_id=conv_id,
            question=qa["question"],
            category=int(qa["category"]),
            evidence=tuple(qa["evidence"]),
        )
        for qa in data["qa"]
        if qa.get("category") in QUERY_CATEGORIES and qa.get("evidence")
    ]
    return Conversation(conv_id, turns), questions


def load_locomo(
    data_dir: Path = DEFAULT_DATA_DIR, limit_convs: int | None = None
) -> tuple[list[Conversation], list[Question]]:
    """All conversations (sorted by file name) and their query questions."""
    paths = sorted(Path(data_dir).glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no LoCoMo *.json files in {data_dir}")
    if limit_convs is not None:
        paths = paths[:limit_convs]
    convs: list[Conversation] = []
    questions: list[Question] = []
    for path in paths:
        conv, qs = load_conversation(path)
        convs.append(conv)
        questions.extend(qs)
    return convs, questions


def unmatched_evidence(
    convs: list[Conversation], questions: list[Question]
) -> list[tuple[Question, str]]:
    """Evidence ids that name no turn of their conversation (e.g. "D8:6; D9:17", "D").

    They stay in recall's denominator: the README's measure is the share of a question's
    evidence as given, so no system can reach 1.0 on these 4 questions (of 760).
    """
    known = {c.conv_id: {t.dia_id for t in c.turns} for c in convs}
    return [(q, e) for q in questions for e in q.evidence if e not in known[q.conv_id]]


def recall_at_k(ranked_ids: list[str], evidence: tuple[str, ...] | list[str], k: int) -> float:
    """Share of the evidence ids found among the first k ranked ids."""
    if not evidence:
        raise ValueError("recall is undefined for a question without evidence")
    top = set(ranked_ids[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)
