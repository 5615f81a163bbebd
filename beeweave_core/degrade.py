"""Graceful degradation, shared by the faces of BeeWeave (LangChain, LlamaIndex).

An agent must keep answering when its memory is out of reach: a SQLite file locked by
another process, PostgreSQL down, a BeeWeave server that cannot be reached. A face that
absorbs such a failure logs it as a warning, counts it in its ``errors`` and answers
without memories; it does nothing special to recover, the next call simply tries the
store again. Only ``StoreUnavailableError`` is absorbed this way: bad input
(``InvalidInputError`` and the rest) still raises, so a caller's bug is never hidden.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import StoreUnavailableError

__all__ = ["Failures"]

_T = TypeVar("_T")


class Failures:
    """The failures one face absorbed: each is logged on the face's logger and counted.

    Thread-safe: a face may be called from several threads (``asyncio.to_thread``, tools
    run in parallel).
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._count = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return self._count

    def record(self, message: str, *args: Any, level: int = logging.WARNING, exc_info: bool = False) -> None:
        """Count one failure and log ``message % args`` at ``level``."""
        with self._lock:
            self._count += 1
        self.logger.log(level, message, *args, exc_info=exc_info)

    def unless_unavailable(self, what: str, call: Callable[[], _T], fallback: _T) -> _T:
        """``call()``; if the store is unavailable, ``fallback`` (the failure is logged and counted)."""
        try:
            return call()
        except StoreUnavailableError as exc:
            self.record("BeeWeave %s: the store is unavailable (%s); going on without it", what, exc)
            return fallback
