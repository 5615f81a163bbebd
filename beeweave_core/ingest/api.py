"""Ingestion API mixin. Being built: see issue 4."""

from __future__ import annotations


class IngestMixin:
    pass
