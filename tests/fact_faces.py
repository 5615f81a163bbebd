"""What the face tests of facts that change share (like relevance_faces.py): the times of the
two statements and, per language, what the user said, the question asked and the values."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

T0 = datetime(2025, 1, 10, 9, 0, tzinfo=timezone.utc)  # "I live in Berlin"
T1 = T0 + timedelta(days=45)  # "I moved to Munich"
# language -> (the old statement, the new one, the question, the old value, the new value)
CASES = {
    "en": ("I live in Berlin.", "I moved to Munich.", "where do I live", "Berlin", "Munich"),
    "zh": ("我住在北京", "我搬到了上海", "我住在哪里", "北京", "上海"),
}
