"""One check for a memory, whoever writes it: ``add()``, the REST service and an import refuse
the same values with the same error, and a refused import writes nothing (issue 47, item 9).
The CLI reports a bad export file in one line with exit code 1, never 70 ("internal error")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beeweave_core import BeeWeave, BeeWeaveError, InvalidInputError, NotFoundError
from beeweave_core.cli import main as cli_main
from beeweave_core.server import open_memory
from beeweave_core.server.service import MemoryService
from tests.service.service_support import ACME_KEY

EMB = "beeweave:hashing-64"

# (field, value, what the error names): each was stored by an import before the fix.
BAD = [
    ("confidence", 7, "confidence"),
    ("weight", -1, "weight"),
    ("weight", 1e308, "weight"),  # that memory topped every search
    ("access_count", 10**30, "access_count"),  # its export no longer imported anywhere
    ("tags", "abc", "tags"),  # stored as ['a', 'b', 'c']
    ("processed_content", ["x"], "processed_content"),  # a 500 over REST
    ("processed_content", "x", "processed_content"),
]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request):
    if request.param == "sqlite":
        m = BeeWeave(embedder=EMB)
    else:
        from tests.postgres.pg_support import new_tenant

        m = open_memory(request.getfixturevalue("pg_url"), tenant=new_tenant(), embedder=EMB)
    yield m
    m.close()


@pytest.fixture(scope="module")
def pg_url():
    from tests.postgres.pg_support import fresh_schema, schema_url, server_url

    with fresh_schema() as schema:
        yield schema_url(server_url(), schema)


def _export(text: str = "I keep my bike in the cellar.", cid: str = "c1", user: str = "ann") -> dict:
    with BeeWeave(embedder=EMB) as m:
        m.add(text, user_id=user, chunk_id=cid)
        return json.loads(json.dumps(MemoryService(m).export_user(user), default=str))


@pytest.mark.parametrize("field,value,named", BAD)
def test_an_import_refuses_what_add_refuses_and_writes_nothing(store, field, value, named):
    data = _export()
    data["chunks"][0][field] = value
    with pytest.raises(InvalidInputError, match=named):
        MemoryService(store).import_user(data)
    assert store.count() == 0 and MemoryService.export_is_empty(MemoryService(store).export_user("ann"))
    if field in ("confidence", "weight"):  # add() had no range either: the library took them
        with pytest.raises(InvalidInputError, match=named):
            store.add("I keep my bike in the cellar.", user_id="ann", **{field: value})
        assert store.count() == 0


def test_a_memory_built_with_one_string_for_tags_is_refused():
    from beeweave_core.records import KnowledgeChunk

    with pytest.raises(InvalidInputError, match="tags must be a list"):
        KnowledgeChunk("text", "ann", tags="abc")


@pytest.mark.parametrize("value", [["x"], "x"])
def test_rest_import_of_a_malformed_processed_content_is_400_not_500(live, value):
    data = _export(user="pc-user")
    data["chunks"][0]["processed_content"] = value
    with live.http(ACME_KEY) as h:
        r = h.post("/api/v1/users/pc-user/import", json=data)
        assert r.status_code == 400 and "processed_content" in r.json()["detail"], r.text
        assert h.get("/api/v1/memories/c1").status_code == 404


def _import(tmp_path: Path, capsys, *files: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = cli_main(["--store", str(tmp_path / "dst.db"), "--embedder", EMB, "import", *map(str, files)])
    return code, capsys.readouterr().err


def test_the_cli_reports_a_file_that_is_not_utf8_or_too_deep_in_one_line(tmp_path, capsys):
    latin = tmp_path / "latin.json"
    latin.write_bytes(json.dumps(_export("Ich wohne in Köln."), ensure_ascii=False).encode("latin-1"))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for path, says in ((latin, "not UTF-8"), (deep, "nested too deeply")):
        code, err = _import(tmp_path, capsys, path)
        assert code == 1 and says in err and path.name in err, err
        assert len(err.strip().splitlines()) == 1 and "internal error" not in err


def test_two_files_naming_one_id_are_refused_before_either_is_written(tmp_path, capsys):
    ann, bob = tmp_path / "ann.json", tmp_path / "bob.json"
    ann.write_text(json.dumps(_export("Ann's bike is red.", cid="same", user="ann")))
    bob.write_text(json.dumps(_export("Bob's car is blue.", cid="same", user="bob")))
    code, err = _import(tmp_path, capsys, ann, bob)
    # Before: ann.json was imported, then bob.json failed saying "nothing was imported".
    assert code == 1 and "ann.json and" in err and "bob.json" in err and "'same'" in err, err
    with open_memory(str(tmp_path / "dst.db")) as m:
        assert m.count() == 0
    # The same memory in two files is not a conflict: the second import skips it.
    again = tmp_path / "ann2.json"
    again.write_text(ann.read_text())
    code, err = _import(tmp_path, capsys, ann, again)
    assert code == 0, err
    with open_memory(str(tmp_path / "dst.db")) as m:
        assert [c.id for c in m.get_many(["same"])] == ["same"]


def test_a_server_refusing_one_file_gets_none_written(live, tmp_path, capsys):
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps(_export("Dana walks to work.", cid="srv-ok", user="dana")))
    # A memory id acme already holds for another user: the server refuses that file.
    with live.client(ACME_KEY) as c:
        c.add("Someone else's note.", user_id="erin", chunk_id="srv-taken")
    taken = tmp_path / "taken.json"
    taken.write_text(json.dumps(_export("Dana's note.", cid="srv-taken", user="dana")))
    capsys.readouterr()
    code = cli_main(["--store", live.url, "--api-key", ACME_KEY, "import", str(ok), str(taken)])
    err = capsys.readouterr().err
    # Before: ok.json was written, then taken.json refused ("ok.json imported before it").
    assert code == 1 and "taken.json" in err and "imported before it" not in err, err
    with live.client(ACME_KEY) as c:
        with pytest.raises(NotFoundError):
            c.get("srv-ok")
        # checking writes nothing; the check and the import refuse alike
        data = json.loads(taken.read_text())
        with pytest.raises(BeeWeaveError) as checked:
            c.check_import(data)
        with pytest.raises(BeeWeaveError) as imported:
            c.import_user(data)
        assert type(checked.value) is type(imported.value) and "srv-taken" in str(checked.value)
        assert c.check_import(json.loads(ok.read_text()))["user_id"] == "dana"
        with pytest.raises(NotFoundError):
            c.get("srv-ok")
    code = cli_main(["--store", live.url, "--api-key", ACME_KEY, "import", str(ok)])
    assert code == 0
    with live.client(ACME_KEY) as c:
        assert c.get("srv-ok").content == "Dana walks to work."



def test_a_lifecycle_cannot_raise_a_weight_past_what_a_memory_may_hold():
    # Feedback clamps a weight to max_weight: above MAX_WEIGHT, a rated memory would fail the check.
    from beeweave_core.lifecycle.config import LifecycleConfig

    with pytest.raises(InvalidInputError, match="max_weight"):
        LifecycleConfig(max_weight=1e7)
