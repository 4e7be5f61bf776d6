"""Attention maps for clients: piece x piece matrices and word alignments from sentencepiece boundaries."""

from __future__ import annotations

import numpy as np

from core.tokenizer import WORD_START, Tokenizer
from core.translation import WordAlignment


def piece_attention(rows: list[np.ndarray], target_len: int, source_len: int) -> np.ndarray:
    """(target pieces, source pieces) float32 from per-step rows over source pieces + EOS.

    The EOS row (the step that produced EOS) and the EOS column (the source's appended EOS) are dropped,
    then every row is renormalised to sum to 1; a row whose weight sat entirely on EOS becomes uniform.
    """
    if target_len == 0 or source_len == 0:
        return np.zeros((target_len, source_len), dtype=np.float32)
    matrix = np.stack(rows[:target_len])[:, :source_len].astype(np.float32)
    sums = matrix.sum(axis=1, keepdims=True)
    uniform = np.full_like(matrix, 1.0 / source_len)
    return np.where(sums > 0, matrix / np.where(sums > 0, sums, 1.0), uniform)


def _words(pieces: list[str]) -> tuple[list[str], np.ndarray]:
    """Word strings and each piece's word index."""
    starts = Tokenizer.word_starts(pieces)
    words: list[str] = [""] * (starts[-1] + 1 if starts else 0)
    for piece, word in zip(pieces, starts, strict=True):
        words[word] += piece
    return [w.replace(WORD_START, "") or w for w in words], np.array(starts, dtype=np.int64)


def word_alignment(source_pieces: list[str], target_pieces: list[str], attention: np.ndarray) -> WordAlignment:
    """Sum attention over a source word's pieces, average it over a target word's pieces; each target word
    links to the source word it attends to most."""
    source_words, source_index = _words(source_pieces)
    target_words, target_index = _words(target_pieces)
    if not source_words or not target_words:
        return WordAlignment(source_words, target_words, [], [])
    by_source = np.zeros((attention.shape[0], len(source_words)), dtype=np.float64)
    np.add.at(by_source.T, source_index, attention.T)
    weights = np.zeros((len(target_words), len(source_words)), dtype=np.float64)
    np.add.at(weights, target_index, by_source)
    weights /= np.bincount(target_index, minlength=len(target_words))[:, None]
    links = [[int(np.argmax(row))] for row in weights]
    return WordAlignment(
        source_words=source_words,
        target_words=target_words,
        weights=[[round(float(w), 6) for w in row] for row in weights],
        links=links,
    )
