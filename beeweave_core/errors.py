"""The one error tree of BeeWeave.

Every failure a caller can provoke with bad input or a bad environment is a
``BeeWeaveError`` subclass, so ``except BeeWeaveError`` is enough to keep an agent
running. Subclasses also inherit the builtin a Python user would expect
(``ValueError``, ``KeyError``...), so existing handlers keep working.
"""

from __future__ import annotations

__all__ = [
    "BeeWeaveError",
    "InvalidInputError",
    "EmptyContentError",
    "DimensionMismatchError",
    "InvalidVectorError",
    "UnknownFilterError",
    "DuplicateIdError",
    "NotFoundError",
    "EmbedderMismatchError",
    "EmbedderChangedError",
    "TokenizerMismatchError",
    "SchemaVersionError",
    "StoreClosedError",
    "MissingDependencyError",
    "StoreUnavailableError",
    "ModelLoadError",
    "PermissionDeniedError",
]


class BeeWeaveError(Exception):
    """Root of every error BeeWeave raises on purpose."""


class InvalidInputError(BeeWeaveError, ValueError):
    """An argument has the wrong type or value; nothing was changed."""


class EmptyContentError(InvalidInputError):
    """Content (or a query) is empty or only whitespace."""


class DimensionMismatchError(InvalidInputError):
    """A vector does not have the store's dimension."""


class InvalidVectorError(InvalidInputError):
    """A vector holds NaN or infinity, or is all zeros."""


class UnknownFilterError(InvalidInputError, KeyError):
    """A filter key is not one BeeWeave knows."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class DuplicateIdError(InvalidInputError):
    """A chunk id is already in the store (or twice in one batch)."""


class NotFoundError(BeeWeaveError, KeyError):
    """No chunk has that id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class EmbedderMismatchError(BeeWeaveError):
    """The store was built with another embedding model."""


class EmbedderChangedError(EmbedderMismatchError):
    """The store moved to another embedding model (a re-embed, usually by another process)
    after this BeeWeave was opened: a vector it computed would be the old model's, so the
    write stored nothing. Open the store again (without ``embedder=`` it uses the new model)."""


class TokenizerMismatchError(BeeWeaveError):
    """The store was built with another tokenizer configuration."""


class SchemaVersionError(BeeWeaveError):
    """The store's schema is newer than this version of BeeWeave understands."""


class StoreClosedError(BeeWeaveError):
    """The store was closed."""


class MissingDependencyError(BeeWeaveError, ImportError):
    """An optional package is needed for this feature; the message names it."""


class ModelLoadError(BeeWeaveError):
    """A model (embedder, cross-encoder) could not be loaded; nothing is downloaded."""


class StoreUnavailableError(BeeWeaveError):
    """The storage backend cannot be reached (locked file, database down)."""


class PermissionDeniedError(BeeWeaveError, PermissionError):
    """The writer may not do this: e.g. an agent without a write rule for a shared scope
    (``ScopeConfig.writers``); nothing was changed."""
