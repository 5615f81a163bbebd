"""The LlamaIndex retriever refuses a user beside other users in its filters, as the LangChain
one does: a search reads only the users named in both (issue 44)."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from beeweave_core import InvalidInputError
from beeweave_llamaindex import BeeWeaveRetriever


def test_a_user_and_other_users_in_filters_is_an_error(memory) -> None:
    others = MetadataFilters(filters=[MetadataFilter(key="user_id", value=["alice", "bob"],
                                                     operator=FilterOperator.IN)])
    with pytest.raises(InvalidInputError, match="user_id"):
        BeeWeaveRetriever(memory, user_id="alice", filters=others)
    BeeWeaveRetriever(memory, filters=others)  # one scope: fine
