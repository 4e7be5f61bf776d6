"""What the engine is asked and what it answers: plain dataclasses shared by engine, batcher and API."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEFAULT_NO_REPEAT_NGRAM_SIZE = 3
"""The server's default guard against repeated n-grams (``MT_NO_REPEAT_NGRAM_SIZE``); docs/service.md
has the measurement it was chosen by."""

DEFAULT_LENGTH_PENALTY = 1.4
"""The server's default length penalty (``MT_LENGTH_PENALTY``), chosen on the default model's dev set: at 1.0
its translations were 5 % shorter than the references, at 1.4 as long at level BLEU (docs/service.md)."""


@dataclass(frozen=True)
class DecodeOptions:
    """Decoding options; hashable so the batcher can group sentences that may share a batch."""

    beam_size: int = 4
    length_penalty: float = 1.0
    max_length: int = 256
    """Absolute cap on generated pieces (EOS included)."""
    max_length_ratio: float = 2.0
    """Cap relative to the source: at most ``ratio * source_pieces + 10`` pieces."""
    n_best: int = 1
    return_attention: bool = False
    no_repeat_ngram_size: int = 0
    """Forbid repeating any n-gram of target pieces within a hypothesis (0: off); see inference/beam_search.py."""

    def max_steps(self, source_len: int, model_max: int) -> int:
        """Number of pieces a hypothesis may reach for a source of ``source_len`` pieces."""
        relative = int(self.max_length_ratio * source_len) + 10
        return max(1, min(self.max_length, relative, model_max))


@dataclass
class Hypothesis:
    """One output of beam search, best first inside a Translation."""

    text: str
    pieces: list[str]
    token_ids: list[int]
    score: float
    """Length-normalised log-probability: sum(log p) / len ** length_penalty (len counts EOS)."""
    token_logprobs: list[float]
    attention: np.ndarray | None = None
    """(target pieces, source pieces) cross-attention, rows sum to 1; EOS rows and columns excluded."""


@dataclass
class WordAlignment:
    """Word-level view of an attention matrix, built from sentencepiece word boundaries."""

    source_words: list[str]
    target_words: list[str]
    weights: list[list[float]]
    """(target words, source words): piece attention (weighed by the bundle's lexicon, inference/alignment.py) summed
    over source pieces, averaged over the target word's pieces that hold a letter or digit."""
    links: list[list[int]]
    """For each target word, the source word indices it attends to most."""


@dataclass
class Translation:
    source_pieces: list[str]
    hypotheses: list[Hypothesis]
    alignment: WordAlignment | None = None
    truncated_source: bool = False
    """True when the source had more pieces than the model accepts and was cut."""
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]
