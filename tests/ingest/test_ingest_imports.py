"""Importing and using the pipeline loads nothing heavy that the work at hand does not need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import beeweave_core.ingest as ingest
from beeweave_core import BeeWeaveError, InvalidInputError

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import json, sys
    from beeweave_core import BeeWeave, HashingEmbedder
    import beeweave_core.ingest
    heavy = ["jieba", "torch", "sentence_transformers", "langchain_core", "llama_index", "tqdm", "pydantic"]
    after_import = [m for m in heavy if m in sys.modules]
    with BeeWeave(embedder=HashingEmbedder(16)) as m:
        m.ingest({"user_id": "u", "query": "How do I reset my password?", "response": "Settings > Security."})
        assert m.flush(30)
    print(json.dumps({"import": after_import, "english_ingest": [m for m in heavy if m in sys.modules]}))
""")


def test_import_and_an_english_ingest_load_nothing_heavy() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"import": [], "english_ingest": []}


def test_public_surface() -> None:
    assert sorted(ingest.__all__) == sorted([
        "KnowledgeEvent", "ToolCall", "DeadLetter", "IngestConfig", "QueueFullPolicy", "PatternConfig",
        "PatternScope", "Window", "AdmissionRules", "SourceRule", "Admission", "Candidate", "Extraction",
        "Extractor", "OfflineExtractor", "LLMExtractor", "HotPattern", "EventQueue", "SQLiteEventQueue",
        "PiiKind", "PiiPattern", "Redactor", "normalize", "QueueFullError", "InvalidEventError",
        "ExtractionError"])
    for name in ingest.__all__:
        assert hasattr(ingest, name), name
    for err in (ingest.QueueFullError, ingest.InvalidEventError, ingest.ExtractionError):
        assert issubclass(err, BeeWeaveError)
    assert issubclass(ingest.InvalidEventError, InvalidInputError)
