"""``beeweave invalidate --from-git``: the files of the last commit mark their memories."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from beeweave_core import BeeWeave
from beeweave_core.cli import main
from beeweave_core.embedders import as_embedder
from tests.service.service_support import EMBEDDER

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo, *argv):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *argv],
                   check=True, capture_output=True)


def test_a_post_commit_hook_marks_the_memories_about_the_changed_files(tmp_path, capsys):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "config.py").write_text("A = 1\n")
    (repo / "src" / "cli.py").write_text("B = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    db = tmp_path / "m.db"
    with BeeWeave(db, embedder=as_embedder(EMBEDDER)) as m:
        cfg = m.add("config.py holds A", user_id="u", metadata={"paths": ["src/config.py"]})
        cli = m.add("cli.py holds B", user_id="u", metadata={"paths": ["src/cli.py"]})
    (repo / "src" / "config.py").write_text("A = 2\n")
    _git(repo, "commit", "-qam", "change config")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert main(["--store", str(db), "invalidate", "--from-git", "--repo", str(repo), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"marked": [cfg], "updated": []}
    with BeeWeave(db, embedder=as_embedder(EMBEDDER)) as m:
        assert m.get(cfg).metadata["verify"] == {"paths": ["src/config.py"], "commit": head,
                                                 "at": m.get(cfg).metadata["verify"]["at"], "weight_before": 1.0}
        assert "verify" not in m.get(cli).metadata
    assert main(["--store", str(db), "invalidate"]) != 0
    assert "no paths" in capsys.readouterr().err
