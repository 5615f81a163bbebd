"""Ingestion pipeline. Being built: see issue 4."""
