"""Storage backends behind one protocol (see ``base.StoreBackend``)."""

from .base import SCHEMA_VERSION, ChunkRow, StoreBackend, VerifyReport
from .sqlite import SQLiteStore

__all__ = ["SCHEMA_VERSION", "ChunkRow", "StoreBackend", "SQLiteStore", "VerifyReport"]
