"""A retriever given a user and, in its filters, other users refuses: a search reads only the
users named in both, so it would silently narrow to the one user (issue 44)."""

from __future__ import annotations

import pytest

from beeweave_core import InvalidInputError
from beeweave_langchain import BeeWeaveRetriever


@pytest.fixture
def store(memory):
    memory.add("Alice's staging database listens on port 5433.", user_id="alice")
    memory.add("Bob's staging database listens on port 6543.", user_id="bob")
    return memory


def test_a_user_and_other_users_in_filters_is_an_error(store) -> None:
    with pytest.raises(InvalidInputError, match="user_id"):
        BeeWeaveRetriever(memory=store, user_id="alice", filters={"user_id": ["alice", "bob"]})
    r = BeeWeaveRetriever(memory=store, user_id="alice")
    r.filters = {"user_id": ["alice", "bob"]}  # set after construction: refused at the call
    with pytest.raises(InvalidInputError, match="user_id"):
        r.invoke("staging database port")


def test_one_scope_either_way_reads_what_it_names(store) -> None:
    both = BeeWeaveRetriever(memory=store, filters={"user_id": ["alice", "bob"]}, abstain_below=0)
    assert {d.metadata["user_id"] for d in both.invoke("staging database port")} == {"alice", "bob"}
    same = BeeWeaveRetriever(memory=store, user_id="alice", filters={"user_id": "alice"}, abstain_below=0)
    assert {d.metadata["user_id"] for d in same.invoke("staging database port")} == {"alice"}
