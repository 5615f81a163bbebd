"""The PostgreSQL + pgvector backend: one schema shared by many processes and hosts."""

# The connection module first: without psycopg, psycopg_pool or pgvector it raises the
# MissingDependencyError that names the extra, before any other module imports psycopg.
from . import connection  # noqa: F401
from .store import PostgresStore

__all__ = ["PostgresStore"]
