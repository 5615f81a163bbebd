"""Which file a path names, so that an open store or queue notices its file was deleted or
replaced underneath it (a write into an unlinked file would be acknowledged and then lost)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["file_id"]


def file_id(path: Path) -> tuple[int, int] | None:
    """The device and inode of ``path`` (``None`` when there is no such file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
