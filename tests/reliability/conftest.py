"""Fixtures of the reliability suite (the helpers are in ``rel_support``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # rel_support and the child scripts import by name
    sys.path.insert(0, str(HERE))
