"""The in-memory search index: BM25 with session context, vectors, filter and rank columns."""
