"""A store file deleted (or replaced) while a store has it open: SQLite would keep writing to
the deleted file's inode, so every later write was acknowledged and then lost at close, and a
reopen started a new, empty store (found by a user trial). Writes and reads now refuse."""

from __future__ import annotations

import contextlib
import os

import pytest

from beeweave_core import BeeWeave, StoreUnavailableError


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_an_open_store_refuses_work_once_its_file_is_gone(tmp_path, how):
    path = tmp_path / "d.db"
    m = BeeWeave(str(path), embedder="beeweave:hashing-64")
    ids = [m.add(f"note {i} about tea", user_id="u") for i in range(3)]
    for f in tmp_path.iterdir():
        f.unlink()
    if how == "replaced":
        with BeeWeave(str(path), embedder="beeweave:hashing-64") as other:
            other.add("another store's note", user_id="u")
    for call in (lambda: m.add("written after the delete", user_id="u"), lambda: m.search("tea", user_id="u"),
                 lambda: m.update(ids[0], content="changed"), lambda: m.delete(ids[1])):
        with pytest.raises(StoreUnavailableError, match="deleted or replaced while open"):
            call()
    with contextlib.suppress(StoreUnavailableError):  # pending access counts could not be written
        m.close()
    if how == "replaced":  # the other store's file is left as that store wrote it
        with BeeWeave(str(path), embedder="beeweave:hashing-64") as again:
            assert again.count() == 1 and again.search("note", user_id="u")[0].chunk.raw_content == (
                "another store's note")
    else:  # nothing written beside a file that is not there
        assert sorted(os.listdir(tmp_path)) == []
