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


class TreeStepper:
    """Next-token log-probabilities drawn at random per prefix (seeded by the prefix), so each hypothesis
    sees its own distribution; tracks prefixes through ``reorder`` exactly as the cache rows move."""

    def __init__(self, sentences: int, vocab: int, seed: int, eos_bias: float):
        self.rows: list[tuple[int, ...]] = [(seed, s) for s in range(sentences)]
        self.vocab, self.eos_bias = vocab, eos_bias
        self.steps = 0

    def step(self, tokens: np.ndarray, reorder: np.ndarray, k: int):  # type: ignore[no-untyped-def]
        batch, hyps = tokens.shape
        self.rows = [(*self.rows[r], int(t)) for r, t in zip(reorder, tokens.reshape(-1), strict=True)]
        self.steps += batch  # sentence-steps: a sentence that leaves early saves its remaining ones
        logits = np.stack([np.random.default_rng(abs(hash(row))).normal(0, 2, self.vocab) for row in self.rows])
        logits[:, [PAD, BOS]] = -np.inf
        logits[:, EOS] += self.eos_bias
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        ids = np.argsort(-logp, axis=1, kind="stable")[:, :k]
        top = np.take_along_axis(logp, ids, axis=1).astype(np.float32)
        return top.reshape(batch, hyps, k), ids.reshape(batch, hyps, k), np.zeros((batch, hyps, 3), np.float32)

    def keep(self, sentences: np.ndarray) -> None:
        pass  # rows of finished sentences are simply never named by reorder again


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 1.0, 2.0])
@pytest.mark.parametrize("n_best", [1, 2])
def test_early_stop_changes_no_output(length_penalty: float, n_best: int) -> None:
    saved = 0
    for seed in range(12):
        eos_bias = [0.0, 2.0, 4.0][seed % 3]
        runs = {}
        for early in (False, True):
            stepper = TreeStepper(4, 12, seed, eos_bias)
            out = search(
                stepper,
                [3] * 4,
                [6, 9, 12, 15],
                beam_size=3,
                length_penalty=length_penalty,
                n_best=n_best,
                vocab_size=12,
                bos_id=BOS,
                eos_id=EOS,
                early_stop=early,
            )
            runs[early] = (out, stepper.steps)
        (plain, plain_steps), (early_out, early_steps) = runs[False], runs[True]
        for a, b in zip(plain, early_out, strict=True):
            assert [h.tokens for h in a] == [h.tokens for h in b]
            assert [h.score for h in a] == [h.score for h in b]
        assert early_steps <= plain_steps
        saved += plain_steps - early_steps
    if n_best == 1:  # with n_best 2 of beam 3 the bound rarely beats the beam filling up; with 1 it does
        assert saved > 0


def test_early_stop_leaves_once_nothing_alive_can_win() -> None:
    # EOS 0.9 from the start: [EOS] scores log 0.9; the runner-up A (0.05) can at best reach log(0.05) / 10.
    stepper = ScriptedStepper([[1e-9, 0.05, 1e-9, 0.9, 0.05]])
    [[best]] = search(
        stepper, [1], [10], beam_size=2, length_penalty=1.0, n_best=1, vocab_size=5, bos_id=BOS, eos_id=EOS
    )
    assert best.tokens == [EOS]
    assert stepper.shapes == [(1, 1)]  # without the bound a second step would fill the beam


def _brute_force(
    seed: int, sentence: int, vocab: int, eos_bias: float, beam: int, max_len: int, n: int, length_penalty: float
) -> list[tuple[list[int], float]]:
    """The search rules on full distributions, one sentence, banned tokens at -inf: the reference."""

    def logp(tokens: list[int]) -> np.ndarray:
        rng = np.random.default_rng(abs(hash((seed, sentence, BOS, *tokens))))
        logits = rng.normal(0, 2, vocab)
        logits[[PAD, BOS]] = -np.inf
        logits[EOS] += eos_bias
        out = (logits - np.log(np.exp(logits).sum())).astype(np.float32).astype(np.float64)
        seen = {tuple(tokens[j : j + n]) for j in range(len(tokens) - n + 1)}
        for gram in seen:
            if list(gram[:-1]) == tokens[len(tokens) - n + 1 :] or n == 1:
                out[gram[-1]] = -np.inf
        return out

    alive: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float]] = []
    for step in range(max_len):
        proposals = []
        for i, (tokens, score) in enumerate(alive):
            lp = logp(tokens)
            for r, token in enumerate(np.argsort(-lp, kind="stable")[: min(2 * beam, vocab)]):
                proposals.append((score + lp[token], i, r, int(token)))
        proposals.sort(key=lambda p: -p[0])  # stable: ties keep (hypothesis, rank) order
        grown: list[tuple[list[int], float]] = []
        for score, i, _, token in proposals:
            tokens = [*alive[i][0], token]
            if token == EOS:
                finished.append((tokens, score / len(tokens) ** length_penalty))
            else:
                grown.append((tokens, score))
                if len(grown) == beam:
                    break
        if step + 1 >= max_len:
            finished += [(t, s / len(t) ** length_penalty) for t, s in grown]
            grown = []
        alive = grown
        if len(finished) >= beam or not alive:
            break
    return sorted(finished, key=lambda f: -f[1])


def _repeats(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[j : j + n]) for j in range(len(tokens) - n + 1) if EOS not in tokens[j : j + n]]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("beam", [1, 3])
def test_no_repeat_ngram_equals_brute_force_on_full_distributions(n: int, beam: int) -> None:
    vocab, sentences, max_lens, changed = 9, 3, [8, 10, 12], 0
    for seed in range(10):
        eos_bias = [-3.0, 0.0][seed % 2]  # a low EOS bias makes long hypotheses, where repeats appear
        outputs = {}
        for guard in (0, n):
            outputs[guard] = search(
                TreeStepper(sentences, vocab, seed, eos_bias),
                [3] * sentences,
                max_lens,
                beam_size=beam,
                length_penalty=0.6,
                n_best=beam,
                vocab_size=vocab,
                bos_id=BOS,
                eos_id=EOS,
                no_repeat_ngram=guard,
            )
        for s in range(sentences):
            expected = _brute_force(seed, s, vocab, eos_bias, beam, max_lens[s], n, 0.6)[:beam]
            got = outputs[n][s]
            assert [h.tokens for h in got] == [t for t, _ in expected]
            np.testing.assert_allclose([h.score for h in got], [sc for _, sc in expected], rtol=1e-12)
            assert not any(_repeats(h.tokens, n) for h in got)
            changed += [h.tokens for h in got] != [h.tokens for h in outputs[0][s]]
    assert changed > 0, "the random trees should repeat n-grams without the guard"
