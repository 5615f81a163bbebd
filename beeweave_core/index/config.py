"""How the in-memory indexes score (``IndexConfig``): BM25's constants and session context.

Saved with a store, so that reopening it reproduces its scores (``SQLiteStore`` and
``PostgresStore`` read it back); the work is done by :class:`~beeweave_core.index.memory_index.MemoryIndex`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..config_rules import Choice, Number, Rule, check_fields
from ..errors import InvalidInputError
from .turns import SessionContext

__all__ = ["IndexConfig"]


@dataclass(frozen=True)
class IndexConfig:
    """How the indexes score; saved with the store so reopening reproduces results.

    Attributes:
        k1, b: Okapi BM25 constants (the idf is Lucene's, which needs no floor: see
            ``bm25.py``). A low ``b`` keeps long, fact-dense memories from being penalised
            for their length. Stores saved when the idf was rank_bm25's also hold its floor,
            ``epsilon``; it is read back and ignored.
        context_radius: how many memories before and after, in the same session, count
            as a memory's context (0 turns context off).
        lexical_context_weight: weight of a neighbour's terms in a memory's term counts.
        vector_context_weight: weight of a neighbour's vector in a memory's vector score.
        session_context: which memories with a session get context: ``"auto"``
            conversation turns only (see ``turns.py``), ``"all"`` every one. A store saved
            before this setting existed reads back as ``"all"``, as it was built.
    """

    k1: float = 1.2
    b: float = 0.3
    context_radius: int = 2
    lexical_context_weight: float = 0.3
    vector_context_weight: float = 0.3
    session_context: SessionContext = SessionContext.AUTO

    def __post_init__(self) -> None:
        check_fields(self, _INDEX_RULES)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["session_context"] = self.session_context.value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IndexConfig:
        # "epsilon": rank_bm25's idf floor, saved by stores of before Lucene's idf; unused now.
        data = {k: v for k, v in data.items() if k != "epsilon"}
        try:
            return cls(**{"session_context": SessionContext.ALL, **data})
        except TypeError as exc:
            raise InvalidInputError(f"not an index configuration: {data!r}") from exc


_INDEX_RULES: dict[str, Rule] = {
    "k1": Number(0), "b": Number(0, 1), "context_radius": Number(0, integer=True),
    "lexical_context_weight": Number(0), "vector_context_weight": Number(0),
    "session_context": Choice(SessionContext),
}
