"""Privacy: redacted personal data never reaches the files, the indexes or the embedder;
forgetting a user leaves nothing of them in any table or index; an export holds all of a
user's data and nothing of anyone else's.

The personal data is generated, seeded: e-mail addresses, Chinese mobile numbers, Chinese
resident IDs with a valid check digit, Luhn-valid card numbers (plain and grouped), and API
keys of several providers, planted in questions, answers, tool inputs, outputs and errors,
and imported documents. Files are read as raw bytes: the store, its WAL, the HNSW graph and
its keys, the ingest queue, its WAL and its intake journal.
"""

from __future__ import annotations

import json
import random
import sqlite3
import string
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig
from beeweave_core.server.service import MemoryService
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.reliability.rel_support import ALL_STATUSES, all_chunks, small_hnsw
from tests.support import Recording

pytestmark = pytest.mark.slow

N_EVENTS = 24
_CN_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


# -- planted personal data ------------------------------------------------------------------------------
def cn_id(rnd: random.Random) -> str:
    body = (rnd.choice(["11", "31", "44", "51"]) + f"{rnd.randint(0, 9999):04d}"
            + f"{rnd.randint(1950, 2005)}{rnd.randint(1, 12):02d}{rnd.randint(1, 28):02d}" + f"{rnd.randint(0, 999):03d}")
    return body + "10X98765432"[sum(int(c) * w for c, w in zip(body, _CN_WEIGHTS, strict=True)) % 11]


def luhn_card(rnd: random.Random) -> str:
    digits = [4] + [rnd.randint(0, 9) for _ in range(14)]
    total = sum(d if i % 2 else (2 * d - 9 if 2 * d > 9 else 2 * d) for i, d in enumerate(reversed(digits)))
    return "".join(map(str, digits)) + str((10 - total % 10) % 10)


def pii_set(rnd: random.Random) -> dict[str, str]:
    alnum = string.ascii_letters + string.digits
    card = luhn_card(rnd)
    return {
        "email": "".join(rnd.choices(string.ascii_lowercase, k=9)) + "@" + rnd.choice(["example.com", "corp.cn"]),
        "phone": "1" + rnd.choice("3589") + "".join(rnd.choices(string.digits, k=9)),
        "national_id": cn_id(rnd),
        "card": card,
        "card_grouped": " ".join(card[i:i + 4] for i in range(0, 16, 4)),
        "openai_key": "sk-" + "".join(rnd.choices(alnum, k=32)),
        "aws_key": "AKIA" + "".join(rnd.choices(string.ascii_uppercase + string.digits, k=16)),
        "github_token": "ghp_" + "".join(rnd.choices(alnum, k=36)),
    }


def secrets_of(pii: dict[str, str]) -> list[str]:
    """What must never be found: every value, and the digits of the grouped card."""
    return [*pii.values(), pii["card_grouped"].replace(" ", "")]


def leaky_event(i: int, pii: dict[str, str]) -> dict[str, Any]:
    return {"user_id": "alice", "id": f"leak{i}", "session_id": "s1",
            "query": f"Write to {pii['email']} or call {pii['phone']}; card {pii['card_grouped']}?",
            "response": f"Done. ID {pii['national_id']} is on file, card {pii['card']} charged, key {pii['openai_key']}.",
            "intermediate_steps": [
                {"tool": "crm", "input": {"email": pii["email"], "api_key": pii["aws_key"]},
                 "output": {"phone": pii["phone"], "card": int(pii["card"]), "note": f"token {pii['github_token']}"}},
                {"tool": "billing", "input": pii["card"], "error": f"card {pii['card']} declined for {pii['email']}"}]}


def leaks(blob: bytes | str, secrets: list[str]) -> list[str]:
    data = blob.encode("utf-8", "surrogatepass") if isinstance(blob, str) else blob
    return [s for s in secrets if s.encode() in data]


def file_leaks(folder: Path, secrets: list[str], *, skip: tuple[str, ...] = ()) -> dict[str, list[str]]:
    out = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and not p.name.endswith(skip):
            found = leaks(p.read_bytes(), secrets)
            if found:
                out[p.name] = found
    return out


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A store that ingested leaky events and documents (redaction on: the default), flushed."""
    folder = tmp_path_factory.mktemp("pii")
    rnd = random.Random(2024)
    pii = [pii_set(rnd) for _ in range(N_EVENTS)]
    emb = Recording()
    with small_hnsw(16):
        m = BeeWeave(folder / "memory.db", embedder=emb, ingest=IngestConfig())
        for i, p in enumerate(pii):
            m.ingest(leaky_event(i, p))
        m.import_documents([f"# Contacts\n\nMail {p['email']}, phone {p['phone']}, card {p['card_grouped']}."
                            for p in pii[:4]], user_id="alice", format="markdown")
        assert m.flush(60) and m.dead_letters() == []
        m.search("card declined", user_id="alice")  # a query vector, and the graph is built
        m.flush()
        secrets = [s for p in pii for s in secrets_of(p)]
        yield {"memory": m, "folder": folder, "secrets": secrets, "embedder": emb}
        m.close()


def test_redacted_data_is_not_in_the_records_nor_the_embedder(planted) -> None:
    m, secrets = planted["memory"], planted["secrets"]
    chunks = all_chunks(m.backend)
    assert len(chunks) >= N_EVENTS * 2
    assert leaks("\n".join(c.to_json() for c in chunks.values()), secrets) == []
    assert planted["embedder"].seen and leaks("\n".join(planted["embedder"].seen), secrets) == []


def test_redacted_data_is_not_in_the_lexical_index(planted) -> None:
    m, secrets = planted["memory"], planted["secrets"]
    terms = list(m.backend.index.term_ids)
    assert not [t for t in terms if any(s.lower() in t.lower() or t.lower() in s.lower() and len(t) >= 8
                                        for s in secrets)]
    from beeweave_core.filters import build_filter

    for s in secrets:
        counts = {t: 1 for t in m.tokenizer(s)}
        assert m.backend.lexical_search(counts, build_filter({"status": ALL_STATUSES}), 5) == [] or \
            not any(len(t) >= 8 for t in counts), s


def test_redacted_data_is_not_in_the_store_files_while_open(planted) -> None:
    assert file_leaks(planted["folder"], planted["secrets"], skip=(".queue", ".queue-wal", ".queue-shm",
                                                                   ".intake")) == {}


def test_redacted_data_is_not_in_the_queue_files_while_open(planted) -> None:
    assert file_leaks(planted["folder"], planted["secrets"]) == {}


def test_redacted_data_is_in_no_file_after_close(tmp_path: Path) -> None:
    rnd = random.Random(7)
    pii = [pii_set(rnd) for _ in range(6)]
    with small_hnsw(4):
        with BeeWeave(tmp_path / "memory.db", embedder=HashingEmbedder(32), ingest=IngestConfig()) as m:
            for i, p in enumerate(pii):
                m.ingest(leaky_event(i, p))
            assert m.flush(30)
            m.search("card", user_id="alice")
    names = {p.name for p in tmp_path.iterdir()}
    assert {"memory.db", "memory.db.queue", "memory.db.queue.intake", "memory.db.hnsw"} <= names
    assert file_leaks(tmp_path, [s for p in pii for s in secrets_of(p)]) == {}


def test_personal_data_in_event_metadata_is_redacted(tmp_path: Path) -> None:
    pii = pii_set(random.Random(3))
    with BeeWeave(tmp_path / "memory.db", embedder=HashingEmbedder(32), ingest=IngestConfig()) as m:
        m.ingest({"user_id": "alice", "query": "who is the contact?", "response": "the usual one",
                  "metadata": {"contact": pii["email"], "phone": pii["phone"]}})
        assert m.flush(30)
        assert leaks("\n".join(c.to_json() for c in all_chunks(m.backend).values()), secrets_of(pii)) == []


# -- forget and export -----------------------------------------------------------------------------------
ALICE_WORDS = "zorblax quintessa flibbertigibbet"  # words nobody else uses


def lived_in(m: BeeWeave) -> MemoryService:
    """Two users with everything the lifecycle keeps about a user: memories of every status,
    relationships, feedback, stale flags in the review queue, merged duplicates with versions
    and audit entries, facts and conflicts, hot question patterns, recorded searches, standing queries."""
    svc = MemoryService(m)
    for user, words in (("alice", ALICE_WORDS), ("bob", "plain ordinary words")):
        for i in range(6):
            m.ingest({"user_id": user, "id": f"{user}-ev{i}", "session_id": f"{user}-s",
                      "query": f"How do I reset the {words} password?",
                      "response": f"{user} resets the {words} password in settings, step {i}."})
        assert m.flush(30)
        ids = m.add_many([{"content": f"{user} said {words} twice", "user_id": user, "chunk_id": f"{user}-dup{j}"}
                          for j in range(2)], show_progress=False)
        m.remember_fact("home", f"{user} lives in {words.split()[0]}town", user_id=user)
        m.remember_fact("home", f"{user} moved to {words.split()[1]}ville", user_id=user)
        odd = m.add(f"{user} keeps an odd note: {words} {user}", user_id=user, tags=["note"])
        for _ in range(3):
            m.feedback([odd, ids[0]], "down")  # stale: into the review queue
        svc.search(f"{words} password", user_id=user)
        m.watch(f"{words} password changes", user_id=user)  # a standing query is the user's too
    m.maintain()  # merges the duplicates: versions and audit entries
    svc.flush()
    return svc


def _sqlite_rows(db: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: [json.dumps(r, default=lambda b: b.hex()) for r in con.execute(f'SELECT * FROM "{t}"')]
                for t in tables}
    finally:
        con.close()


def _alice_traces(rows: dict[str, list[str]], alice_ids: set[str]) -> dict[str, list[str]]:
    marks = ["alice", *ALICE_WORDS.split(), *alice_ids]
    return {t: [r for r in rs if any(k in r for k in marks)][:3] for t, rs in rows.items()
            if any(any(k in r for k in marks) for r in rs)}


def _check_export(svc: MemoryService, user: str, other: str, all_ids: dict[str, set[str]]) -> None:
    data = svc.export_user(user)
    text = json.dumps(data, ensure_ascii=False)
    assert {c["id"] for c in data["chunks"]} == all_ids[user]
    assert data["versions"] and data["audit"] and data["facts"] and data["review"] and data["searches"]
    assert [w["user_id"] for w in data["watches"]] == [user]
    assert other not in text and not any(i in text for i in all_ids[other])


def test_export_has_all_of_a_user_and_nothing_of_others_then_forget_leaves_no_row(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with BeeWeave(db, embedder=HashingEmbedder(32), ingest=IngestConfig()) as m:
        svc = lived_in(m)
        everything = all_chunks(m.backend)
        ids = {u: {c.id for c in everything.values() if c.user_id == u} for u in ("alice", "bob")}
        _check_export(svc, "alice", "bob", ids)
        _check_export(svc, "bob", "alice", ids)
        rows = _sqlite_rows(db)
        n_alice_log = sum('"alice"' in r for r in rows["log"])
        export = svc.export_user("alice")
        assert len(export["versions"]) + len(export["audit"]) == n_alice_log  # every log entry of hers
        assert svc.forget_user("alice") == len(ids["alice"])
        assert m.verify().ok
        assert _alice_traces(_sqlite_rows(db), ids["alice"]) == {}  # her own words too
        assert {c.id for c in all_chunks(m.backend).values()} == ids["bob"]
        _check_export(svc, "bob", "alice", ids)


def test_forget_removes_the_users_own_words_from_the_index(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with BeeWeave(db, embedder=HashingEmbedder(32), ingest=IngestConfig()) as m:
        svc = lived_in(m)
        svc.forget_user("alice")
    terms = {json.loads(r)[1] for r in _sqlite_rows(db)["terms"]}
    assert not terms & set(ALICE_WORDS.split())


@pytest.mark.parametrize("graph", [True, False], ids=["hnsw", "exact"])
def test_forget_leaves_no_bytes_of_the_user_in_the_files(tmp_path: Path, graph: bool) -> None:
    db = tmp_path / "memory.db"
    with small_hnsw(8 if graph else 10_000):  # exact: no graph, every vector only in memory and the rows
        with BeeWeave(db, embedder=HashingEmbedder(32), ingest=IngestConfig()) as m:
            svc = lived_in(m)
            m.search("password", user_id="alice")  # builds the graph (with "hnsw")
            from beeweave_core.filters import build_filter

            mine = [c.id for c in m.backend.scan(build_filter({"status": ALL_STATUSES}, user_id="alice"))]
            vectors = [v.tobytes() for v in m.backend.get_vectors(mine).values()]
            svc.forget_user("alice")
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert [w for w in ALICE_WORDS.split() if w.encode() in blob] == []
    assert sum(v in blob for v in vectors) == 0


def _pg_rows(url: str, tenant: str) -> dict[str, list[str]]:
    import psycopg

    from beeweave_core.store.postgres.options import split_url

    plain, own = split_url(url)
    schema = own.get("schema", "beeweave")
    with psycopg.connect(plain, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.columns WHERE "
                                             "table_schema = %s AND column_name = 'tenant'", (schema,))]
        return {t: [json.dumps(r, default=str) for r in conn.execute(
            f'SELECT * FROM "{schema}"."{t}" WHERE tenant = %s', (tenant,))] for t in tables}


@pytest.mark.slow
def test_forget_on_postgresql_leaves_no_row_of_the_user(pg_url) -> None:  # noqa: F811
    tenant = new_tenant("forget")
    with BeeWeave.from_url(pg_url, tenant=tenant, embedder=HashingEmbedder(32), ingest=IngestConfig()) as m:
        svc = lived_in(m)
        everything = all_chunks(m.backend)
        ids = {u: {c.id for c in everything.values() if c.user_id == u} for u in ("alice", "bob")}
        _check_export(svc, "alice", "bob", ids)
        assert svc.forget_user("alice") == len(ids["alice"])
        assert _alice_traces(_pg_rows(pg_url, tenant), ids["alice"]) == {}  # her own words too
        assert {c.id for c in all_chunks(m.backend).values()} == ids["bob"]
        _check_export(svc, "bob", "alice", ids)
