"""service.beam_search against a scripted stepper: done sentences leave the batch, rules hold."""

from __future__ import annotations

import numpy as np
import pytest

from service.beam_search import search

PAD, UNK, BOS, EOS, A = range(5)


class ScriptedStepper:
    """Every hypothesis of sentence s gets the same next-token log-probabilities ``table[s]``."""

    def __init__(self, table: list[list[float]]):
        self.table = np.log(np.array(table, dtype=np.float64))
        self.sentences = np.arange(len(table))
        self.shapes: list[tuple[int, int]] = []
        self.kept: list[list[int]] = []

    def step(self, tokens: np.ndarray, reorder: np.ndarray, k: int):  # type: ignore[no-untyped-def]
        batch, hyps = tokens.shape
        assert reorder.shape == (batch * hyps,)
        self.shapes.append((batch, hyps))
        logp = self.table[self.sentences]
        ids = np.argsort(-logp, axis=1, kind="stable")[:, :k]
        top = np.take_along_axis(logp, ids, axis=1)
        attention = np.full((batch, hyps, 3), 1 / 3, dtype=np.float32)
        return (
            np.repeat(top[:, None], hyps, 1).astype(np.float32),
            np.repeat(ids[:, None], hyps, 1),
            attention,
        )

    def keep(self, sentences: np.ndarray) -> None:
        self.kept.append(sentences.tolist())
        self.sentences = self.sentences[sentences]


def test_done_sentences_leave_the_batch() -> None:
    stepper = ScriptedStepper(
        [
            [1e-9, 0.1, 1e-9, 0.6, 0.3],  # EOS first: done after two steps
            [1e-9, 0.2, 1e-9, 1e-9, 0.8],  # never EOS: runs to max_len
        ]
    )
    out = search(
        stepper,
        [2, 2],
        [10, 4],
        beam_size=2,
        length_penalty=1.0,
        n_best=2,
        vocab_size=5,
        bos_id=BOS,
        eos_id=EOS,
        with_attention=True,
    )
    assert stepper.kept == [[1]]
    assert stepper.shapes == [(2, 1), (2, 2), (1, 2), (1, 2)]
    first, second = out
    assert first[0].tokens == [EOS] and first[0].score == pytest.approx(np.log(0.6))
    assert second[0].tokens == [A, A, A, A] and len(second) == 2
    assert all(len(h.attention) == 4 and h.attention[0].shape == (3,) for h in second)
    for h in second:
        assert h.score == sum(h.token_logprobs) / 4


def test_beam_one_is_greedy() -> None:
    stepper = ScriptedStepper([[1e-9, 0.3, 1e-9, 0.2, 0.5]])
    [[best]] = search(
        stepper, [1], [3], beam_size=1, length_penalty=1.0, n_best=1, vocab_size=5, bos_id=BOS, eos_id=EOS
    )
    assert best.tokens == [A, A, A]
    assert stepper.shapes == [(1, 1)] * 3
