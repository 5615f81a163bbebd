"""The storage contract by roles (store/roles.py): ``StoreBackend`` is exactly its roles
composed, capabilities are declared once and checked when declared, and nothing in the
engine probes a backend for what it can do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from beeweave_core import InvalidInputError
from beeweave_core.store import roles
from beeweave_core.store.base import Capabilities, StoreBackend
from beeweave_core.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent / "beeweave_core"
REQUIRED = [roles.Meta, roles.Records, roles.SearchIndex, roles.Edges, roles.KeyValue, roles.Log, roles.Users,
            roles.Integrity, roles.Lifecycle]


def _members(protocol: type) -> set[str]:
    return {n for n in vars(protocol) if not n.startswith("_")}


def test_the_backend_is_its_roles_and_its_capabilities() -> None:
    every = [_members(r) for r in REQUIRED]
    assert all(every), "a role without methods"
    assert sum(map(len, every)) == len(set().union(*every)), "a method in two roles"
    assert all(r in StoreBackend.__mro__ for r in REQUIRED)
    # Nothing of its own but the declaration: every method belongs to a role.
    assert _members(StoreBackend) | set(StoreBackend.__annotations__) == {"capabilities"}


def test_capabilities_refuse_what_does_not_play_its_role() -> None:
    assert Capabilities() == Capabilities(file=None, durable=True, read_only=False)
    with pytest.raises(InvalidInputError, match="file"):
        Capabilities(file="store.db")  # type: ignore[arg-type]
    store = SQLiteStore(None)
    try:
        for field in ("retrieval", "term_searches", "queue"):
            with pytest.raises(InvalidInputError, match=field):
                Capabilities(**{field: store})  # SQLite plays none of the optional roles
    finally:
        store.close()


def test_a_backend_declares_what_it_is(tmp_path: Path) -> None:
    memory, file = SQLiteStore(None), SQLiteStore(tmp_path / "s.db")
    try:
        assert memory.capabilities == Capabilities(file=None, durable=False)
        assert file.capabilities == Capabilities(file=tmp_path / "s.db")
    finally:
        memory.close()
        file.close()


_PROBE = re.compile(r"\b(?:getattr|hasattr)\(\s*[\w.]*(?:backend|store)\b")


def test_nothing_probes_a_backend_for_what_it_can_do() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(ROOT.rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if _PROBE.search(line)]
    assert not found, f"declare it in Capabilities instead of probing: {found}"
