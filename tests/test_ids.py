"""Memory ids that carry their user (beeweave_core.ids): two users' ids never meet, whatever
the users and event ids hold ("@", ":", "%", any script)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from beeweave_core.ids import event_memory_id, owned_by, user_tag

# Users and event ids built from the characters that could confuse the format.
tricky = st.text(alphabet=st.sampled_from(["a", "b", "@", ":", "%", "4", "0", "张"]), min_size=1, max_size=6)


@given(tricky, tricky, tricky, tricky, st.integers(0, 3), st.integers(0, 3))
def test_two_users_event_ids_never_collide(u1, u2, e1, e2, n1, n2):
    if u1 != u2:
        assert event_memory_id(e1, u1, n1) != event_memory_id(e2, u2, n2)
        assert user_tag(u1) != user_tag(u2)


@given(tricky, tricky, tricky, st.integers(0, 3))
def test_an_id_a_scoped_key_may_choose_is_never_another_users_event_id(user, name, event, n):
    chosen = f"{name}@{user_tag(user)}"
    assert owned_by(chosen, user) and owned_by(event_memory_id(event, user, n), user)  # an export holds both
    assert chosen != event_memory_id(event, user, n)
    for other in ("a", "a@b", "a:b", "%40"):
        if other != user:
            assert not owned_by(chosen, other) and not owned_by(event_memory_id(event, user, n), other)


def test_readable_for_every_script():
    assert event_memory_id("turn-1", "bob@example.com", 0) == "turn-1@bob%40example.com:0"
    assert event_memory_id("turn-1", "张三", 2) == "turn-1@张三:2"
