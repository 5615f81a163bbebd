"""Session context only where a session is a conversation (index/turns.py), with the
default configuration and the bundled model, on the embedded store and on PostgreSQL:

* facts imported under one session id (profile notes, in English and in Chinese) are
  each found first for their own question, in whatever order they were imported (with
  context folded between them, neighbours took each other's questions);
* in a conversation, an answer turn that shares no word with the question is found
  through the turns before it, and only because they are its context.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from beeweave_core import BeeWeave, IndexConfig, InvalidInputError, KnowledgeChunk, SentenceTransformerEmbedder
from beeweave_core.index.turns import SessionContext, is_turn, lends_context
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

pytestmark = pytest.mark.slow

NOTES_EN = [
    ("Anna's birthday is on the fourth of May.", "When is Anna's birthday?"),
    ("Ben plays tennis every Saturday morning.", "What sport does Ben play?"),
    ("Carla works as a nurse at the city hospital.", "Where does Carla work?"),
    ("Anna is allergic to peanuts.", "What is Anna allergic to?"),
    ("Ben's car is a red Toyota.", "What car does Ben drive?"),
    ("Carla's daughter starts school in September.", "When does Carla's daughter start school?"),
    ("Anna moved to Lisbon last year.", "Where does Anna live now?"),
    ("Ben's favourite food is ramen.", "What is Ben's favourite food?"),
    ("Carla's birthday is on the ninth of June.", "When is Carla's birthday?"),
    ("Anna works as a teacher.", "What is Anna's job?"),
    ("Ben is allergic to cats.", "What is Ben allergic to?"),
    ("Carla drives a blue Honda.", "What car does Carla drive?"),
    ("Anna's favourite food is sushi.", "What is Anna's favourite food?"),
    ("Ben's birthday is on the second of March.", "When is Ben's birthday?"),
    ("Carla plays the violin.", "What instrument does Carla play?"),
    ("Ben works as an engineer.", "What is Ben's job?"),
]
NOTES_ZH = [
    ("小王的生日是五月四号。", "小王的生日是哪天？"),
    ("小李每周六早上打网球。", "小李每周六打什么球？"),
    ("小张在市医院当护士。", "小张在哪家医院上班？"),
    ("小王对花生过敏。", "小王对什么过敏？"),
    ("小李的车是一辆红色的丰田。", "小李开什么车？"),
    ("小张的女儿九月开始上学。", "小张的女儿什么时候上学？"),
    ("小王去年搬到了杭州。", "小王搬到了哪个城市？"),
    ("小李最喜欢吃拉面。", "小李最喜欢吃什么？"),
    ("小张的生日是六月九号。", "小张的生日是哪天？"),
    ("小王的工作是老师。", "小王做什么工作？"),
    ("小李对猫过敏。", "小李对什么过敏？"),
    ("小张开一辆蓝色的本田。", "小张开什么车？"),
    ("小王最喜欢吃寿司。", "小王最喜欢吃什么？"),
    ("小李的生日是三月二号。", "小李的生日是哪天？"),
    ("小张会拉小提琴。", "小张会什么乐器？"),
    ("小李的工作是工程师。", "小李做什么工作？"),
]
# Import orders: the notes are unrelated, so any order must do (with context folded in,
# each of these orders put a neighbour first for at least one question).
ORDERS = (6, 8)

CONVERSATION = [
    ("ben", "Is your sister still living in Porto, Anna?"),
    ("anna", "Yes, she loves the city and her new flat."),
    ("ben", "Anna, what are your plans for the weekend?"),
    ("anna", "Visiting my sister, she is cooking for everyone."),
    ("anna", "How did the job interview at the bakery go yesterday?"),
    ("ben", "It went great, they offered me the position and I start on Monday!"),
    ("anna", "Congratulations! Are you still training for the marathon?"),
    ("ben", "Yes, I ran thirty kilometres last weekend."),
    ("anna", "My sister just adopted a puppy."),
    ("ben", "Oh nice, what breed is it?"),
    ("anna", "A golden retriever named Sunny."),
    ("ben", "I hope I can meet Sunny soon."),
]


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()  # the bundled all-MiniLM-L6-v2, loaded once


@pytest.fixture(params=["sqlite", "postgres"])
def open_memory(request, embedder) -> Iterator:
    opened: list[BeeWeave] = []

    def open_memory() -> BeeWeave:
        if request.param == "sqlite":
            m = BeeWeave(embedder=embedder)
        else:
            m = BeeWeave.from_url(request.getfixturevalue("pg_url"), embedder=embedder, tenant=new_tenant("ctx"))
        opened.append(m)
        return m

    yield open_memory
    for m in opened:
        m.close()


@pytest.mark.model
@pytest.mark.parametrize("notes", [NOTES_EN, NOTES_ZH], ids=["en", "zh"])
def test_notes_sharing_a_session_are_each_found_first(open_memory, notes) -> None:
    for seed in ORDERS:
        order = list(range(len(notes)))
        random.Random(seed).shuffle(order)
        m = open_memory()
        m.add_many([{"content": notes[i][0], "user_id": "u", "session_id": "import", "chunk_id": f"n{i}"}
                    for i in order], show_progress=False)
        for i, (_, question) in enumerate(notes):
            hits = m.search(question, user_id="u", k=3)
            assert hits[0].id == f"n{i}", (seed, question, [h.chunk.raw_content for h in hits])


def _rank(m: BeeWeave, query: str, want: str) -> int:
    ids = [h.id for h in m.search(query, user_id="u", k=len(CONVERSATION))]
    return ids.index(want) if want in ids else len(CONVERSATION)


@pytest.mark.model
def test_an_answer_turn_is_found_through_the_turns_before_it(open_memory) -> None:
    # The same words, once as a conversation (each turn names its speaker) and once as facts.
    as_turns, as_facts = open_memory(), open_memory()
    for m, speaker in ((as_turns, True), (as_facts, False)):
        m.add_many([{"content": text, "user_id": "u", "session_id": "chat", "chunk_id": f"c{i}",
                     "metadata": {"speaker": who} if speaker else {}}
                    for i, (who, text) in enumerate(CONVERSATION)], show_progress=False)
    query, answer = "What breed is the puppy Anna's sister adopted?", "c10"
    assert _rank(as_turns, query, answer) < 3
    assert _rank(as_turns, query, answer) < _rank(as_facts, query, answer)


# -- the evidence --------------------------------------------------------------------------
def _chunk(text: str, **kw) -> KnowledgeChunk:
    return KnowledgeChunk(text, user_id="u", session_id="s", **kw)


@pytest.mark.parametrize("chunk, turn", [
    (_chunk("Caroline: I went to the support group yesterday."), True),
    (_chunk("Caroline Smith: hi"), True),
    (_chunk("用户：我想订一张去上海的票"), True),
    (_chunk("[assistant] Here is your ticket."), True),
    (_chunk("plain words", metadata={"speaker": "bob"}), True),
    (_chunk("plain words", metadata={"role": "user"}), True),
    (_chunk("plain words", metadata={"ingest": {"role": "turn", "event_id": "e1"}}), True),
    (_chunk("plain words", metadata={"ingest": {"role": "tool", "event_id": "e1"}}), True),
    (_chunk("To reset your password, open Settings."), False),
    (_chunk("Q: how do I reset my password? A: open Settings."), False),  # a label, not a speaker
    (_chunk("问：怎么重置密码？答：打开设置。"), False),
    (_chunk("客服小王：您好"), True),
    (_chunk("银行柜员招聘会的主要内容是招聘会：分享职业经验。"), False),  # a clause, not a name
    (_chunk("At 10:30 the train leaves."), False),
    (_chunk("plain words", metadata={"speaker": ""}), False),
    (_chunk("plain words", metadata={"ingest": {"role": "document"}}), False),
    (_chunk("plain words", metadata={"ingest": {"role": "manual"}}), False),
], ids=lambda v: v.raw_content[:24] if isinstance(v, KnowledgeChunk) else str(v))
def test_what_makes_a_memory_a_turn(chunk: KnowledgeChunk, turn: bool) -> None:
    assert is_turn(chunk) is turn
    assert lends_context(chunk, SessionContext.AUTO) is turn
    assert lends_context(chunk, SessionContext.ALL)
    assert not lends_context(chunk.copy(session_id=None), SessionContext.ALL)


def test_ingested_agent_turns_take_context() -> None:
    from beeweave_core import KnowledgeEvent

    with BeeWeave(embedder="beeweave:hashing-64") as m:
        m.ingest(KnowledgeEvent(user_id="u", session_id="s", query="book a table for two", response="Done."))
        m.flush()
        chunks = m.context("s", user_id="u")
        assert chunks and all(is_turn(c) for c in chunks)


def test_session_context_setting() -> None:
    assert IndexConfig().session_context is SessionContext.AUTO
    assert IndexConfig(session_context="all").session_context is SessionContext.ALL
    assert IndexConfig.from_dict(IndexConfig(session_context="all").to_dict()) == IndexConfig(session_context="all")
    assert IndexConfig.from_dict(IndexConfig().to_dict()) == IndexConfig()
    # A store saved before the setting existed was built with context for every memory.
    legacy = {k: v for k, v in IndexConfig().to_dict().items() if k != "session_context"}
    assert IndexConfig.from_dict(legacy).session_context is SessionContext.ALL
    with pytest.raises(InvalidInputError, match="session_context"):
        IndexConfig(session_context="sometimes")
