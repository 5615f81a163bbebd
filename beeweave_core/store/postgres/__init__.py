"""The PostgreSQL + pgvector backend: one schema shared by many processes and hosts."""

from .store import PostgresStore

__all__ = ["PostgresStore"]
