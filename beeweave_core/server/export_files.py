"""Export files as ``beeweave import`` reads them: each read and checked, then all of them
against each other, before anything is written.

A file that cannot be an export (not UTF-8, not JSON, nested past what the parser takes) is
refused with its name and what is wrong, as a bad memory in it is (``read_memories``; the
other sections are checked by the parts of the store it goes to): a bad file is the caller's
mistake, never an internal error. Two files that hold one memory id with
different users or texts are refused together: checked one at a time, each passes, the first
is imported and the second then fails, after a write.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import DuplicateIdError, InvalidInputError
from ..user_export import Memories, read_memories

__all__ = ["read_export", "check_apart"]


def read_export(path: Path) -> tuple[Any, Memories]:
    """The JSON of an export file and its checked memories; ``InvalidInputError`` naming the file."""
    if not path.is_file():
        raise InvalidInputError(f"no export file {path}")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text (byte {exc.start}); no file was imported") from None
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path} is not JSON: {exc}; no file was imported") from None
    except RecursionError:
        raise InvalidInputError(f"{path} is nested too deeply to be an export; no file was imported") from None
    try:
        return data, read_memories(data)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc}; no file was imported") from None


def check_apart(plans: Sequence[tuple[Path, Memories]]) -> None:
    """Refuse files that hold one memory id with another user or text (the same memory in two
    files is fine: the second import skips it, as a repeated import does)."""
    seen: dict[str, tuple[Path, str, str]] = {}
    for path, plan in plans:
        for chunk in plan.chunks:
            first = seen.setdefault(chunk.id, (path, chunk.user_id, chunk.raw_content))
            if first[0] != path and first[1:] != (chunk.user_id, chunk.raw_content):
                raise DuplicateIdError(f"{first[0]} and {path} both hold a memory {chunk.id!r}, with another user "
                                       "or text; no file was imported")
