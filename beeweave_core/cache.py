"""Where BeeWeave keeps what it builds from a model (ONNX graphs): one place for every embedder."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir`` if given, else ``$BEEWEAVE_CACHE``, else ``~/.cache/beeweave``."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("BEEWEAVE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "beeweave"
