"""inference.beam_search against a scripted stepper: done sentences leave the batch, rules hold."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import inference.beam_search as beam_search_module
from inference.beam_search import BeamSearch, Finished, SearchOptions
from inference.beam_search import search as run_search

PAD, UNK, BOS, EOS, A = range(5)


@pytest.fixture(autouse=True, params=["walk", "arrays", "switching"])
def chooser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test three times: hypotheses kept as links and proposals walked in Python (small sets), kept in arrays
    and chosen with numpy (large sets, ARRAYS_FROM), and a set that moves between the two as it grows and shrinks
    past 4 and 3 sentences; all must choose the same."""
    arrays_from = {"walk": 10**9, "arrays": 1, "switching": 4}[request.param]
    monkeypatch.setattr(beam_search_module, "ARRAYS_FROM", arrays_from)
    monkeypatch.setattr(beam_search_module, "GUARDED_ARRAYS_FROM", arrays_from)
    return str(request.param)


def search(
    stepper,  # type: ignore[no-untyped-def]
    source_lengths: list[int],
    max_lens: list[int],
    *,
    vocab_size: int,
    bos_id: int,
    eos_id: int,
    beam_size: int,
    length_penalty: float,
    n_best: int,
    with_attention: bool = False,
    early_stop: bool = True,
    no_repeat_ngram: int = 0,
) -> list[list[Finished]]:
    """All sentences admitted at once with the same options but their own max length."""
    options = [
        SearchOptions(beam_size, length_penalty, n_best, max_len, no_repeat_ngram, with_attention, early_stop)
        for max_len in max_lens
    ]
    sources = [[A] * n for n in source_lengths]
    return run_search(stepper, sources, options, vocab_size=vocab_size, bos_id=bos_id, eos_id=eos_id)


class ScriptedStepper:
    """Every hypothesis of sentence s gets the same next-token log-probabilities ``table[s]``."""

    def __init__(self, table: list[list[float]]):
        self.table = np.log(np.array(table, dtype=np.float64))
        self.sentences = np.arange(0)
        self.shapes: list[tuple[int, int]] = []
        self.kept: list[list[int]] = []

    def admit(self, sources: list[list[int]]) -> None:
        self.sentences = np.concatenate([self.sentences, np.arange(len(sources)) + len(self.sentences)])

    def step(self, tokens: np.ndarray, positions: np.ndarray, reorder: np.ndarray, k: int, attention: bool = True):  # type: ignore[no-untyped-def]
        batch, hyps = tokens.shape
        assert reorder.shape == (batch * hyps,) and positions.shape == (batch,)
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
    assert stepper.kept == [[1], []]  # the second leaves at max_len; the empty set resets the stepper
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

    def __init__(
        self, sentences: int, vocab: int, seed: int, eos_bias: float, ids: list[int] | None = None, ties: bool = False
    ):
        self.ties = ties  # whole-number logits: many proposals score exactly alike
        self.ids = list(range(sentences)) if ids is None else ids  # sentence identities, in admission order
        self.seed, self.running, self.admitted = seed, [], 0  # type: ignore[var-annotated]
        self.rows: list[tuple[int, ...]] = []
        self.vocab, self.eos_bias = vocab, eos_bias
        self.steps = 0
        self.max_batch = 0

    def admit(self, sources: list[list[int]]) -> None:
        self.running += self.ids[self.admitted : self.admitted + len(sources)]
        self.admitted += len(sources)

    def step(self, tokens: np.ndarray, positions: np.ndarray, reorder: np.ndarray, k: int, attention: bool = True):  # type: ignore[no-untyped-def]
        batch, hyps = tokens.shape
        self.max_batch = max(self.max_batch, batch)
        # A sentence at position 0 starts its own prefix; the others continue the cache row ``reorder`` names.
        starts = [(self.seed, self.running[r // hyps]) for r in range(batch * hyps)]
        self.rows = [
            (*(starts[i] if positions[i // hyps] == 0 else self.rows[r]), int(t))
            for i, (r, t) in enumerate(zip(reorder, tokens.reshape(-1), strict=True))
        ]
        self.steps += batch  # sentence-steps: a sentence that leaves early saves its remaining ones
        logits = np.stack([np.random.default_rng(abs(hash(row))).normal(0, 2, self.vocab) for row in self.rows])
        if self.ties:
            logits = np.round(logits)
        logits[:, [PAD, BOS]] = -np.inf
        logits[:, EOS] += self.eos_bias
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        ids = np.argsort(-logp, axis=1, kind="stable")[:, :k]
        top = np.take_along_axis(logp, ids, axis=1).astype(np.float32)
        # each row's cross-attention names its prefix (its length and last token): a row kept with another
        # hypothesis' tokens, or one lost, shows
        attention = np.array([(len(row), row[-1], 1.0) for row in self.rows], np.float32).reshape(batch, hyps, 3)
        return top.reshape(batch, hyps, k), ids.reshape(batch, hyps, k), attention

    def keep(self, sentences: np.ndarray) -> None:
        self.running = [self.running[i] for i in sentences]  # cache rows stay: reorder names the live ones


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
    seed: int,
    sentence: int,
    vocab: int,
    eos_bias: float,
    beam: int,
    max_len: int,
    n: int,
    length_penalty: float,
    ties: bool = False,
) -> list[tuple[list[int], float]]:
    """The search rules on full distributions, one sentence, banned tokens at -inf: the reference."""

    def logp(tokens: list[int]) -> np.ndarray:
        rng = np.random.default_rng(abs(hash((seed, sentence, BOS, *tokens))))
        logits = rng.normal(0, 2, vocab)
        if ties:
            logits = np.round(logits)
        logits[[PAD, BOS]] = -np.inf
        logits[EOS] += eos_bias
        out = (logits - np.log(np.exp(logits).sum())).astype(np.float32).astype(np.float64)
        seen = {tuple(tokens[j : j + n]) for j in range(len(tokens) - n + 1)} if n else set()
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


def _tree_search(
    seed: int,
    vocab: int,
    max_lens: list[int],
    beam: int,
    guard: int,
    eos_bias: float,
    ties: bool = False,
    stepper: TreeStepper | None = None,
) -> list[list[Finished]]:
    """One sentence a max length, each on TreeStepper's random distributions (or ``stepper``'s), searched together as
    the brute-force reference's rules say (length penalty 0.6, ``beam`` best kept)."""
    return search(
        stepper or TreeStepper(len(max_lens), vocab, seed, eos_bias, ties=ties),
        [3] * len(max_lens),
        max_lens,
        beam_size=beam,
        length_penalty=0.6,
        n_best=beam,
        vocab_size=vocab,
        bos_id=BOS,
        eos_id=EOS,
        no_repeat_ngram=guard,
    )


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("beam", [1, 3])
def test_no_repeat_ngram_equals_brute_force_on_full_distributions(n: int, beam: int) -> None:
    vocab, sentences, max_lens, changed = 9, 3, [8, 10, 12], 0
    for seed in range(10):
        eos_bias = [-3.0, 0.0][seed % 2]  # a low EOS bias makes long hypotheses, where repeats appear
        outputs = {guard: _tree_search(seed, vocab, max_lens, beam, guard, eos_bias) for guard in (0, n)}
        for s in range(sentences):
            expected = _brute_force(seed, s, vocab, eos_bias, beam, max_lens[s], n, 0.6)[:beam]
            got = outputs[n][s]
            assert [h.tokens for h in got] == [t for t, _ in expected]
            np.testing.assert_allclose([h.score for h in got], [sc for _, sc in expected], rtol=1e-12)
            assert not any(_repeats(h.tokens, n) for h in got)
            changed += [h.tokens for h in got] != [h.tokens for h in outputs[0][s]]
    assert changed > 0, "the random trees should repeat n-grams without the guard"


class WholeStepper(TreeStepper):
    """TreeStepper handing out every token of the vocabulary, ranked, whatever ``k`` the search asks for; records
    the ``k`` asked."""

    def __init__(self, *args, whole: bool, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.whole = whole
        self.asked: list[int] = []

    def step(self, tokens: np.ndarray, positions: np.ndarray, reorder: np.ndarray, k: int, attention: bool = True):  # type: ignore[no-untyped-def]
        self.asked.append(k)
        return super().step(tokens, positions, reorder, self.vocab if self.whole else k, attention)


@pytest.mark.parametrize("guard", [0, 2])
def test_the_top_k_asked_for_holds_every_proposal_the_walk_reads(guard: int) -> None:
    """The search asks the graph for ``beam + 1`` tokens plus the most any hypothesis bans, not ``2 * beam``
    (module docstring): it must choose exactly as when every hypothesis proposes the whole vocabulary. EOS is often
    a sentence's best first token here, and then its start hypothesis alone must supply the ``beam`` grown ones after
    it: a top-k one token short fails."""
    vocab, beam, max_lens, eos_first = 12, 4, [7, 9, 11, 13], 0
    for seed in range(12):
        runs = {}
        for whole in (False, True):
            stepper = WholeStepper(len(max_lens), vocab, seed, 3.0, whole=whole)
            runs[whole] = _tree_search(seed, vocab, max_lens, beam, guard, 3.0, stepper=stepper)
            if not whole:
                assert min(stepper.asked) == beam + 1 < 2 * beam
        for narrow, wide in zip(runs[False], runs[True], strict=True):
            assert [h.tokens for h in narrow] == [h.tokens for h in wide]
            assert [h.score for h in narrow] == [h.score for h in wide]
            eos_first += [EOS] in [h.tokens for h in wide]
    assert eos_first > 0, "some sentence should finish a hypothesis with EOS at its first step"


@pytest.mark.parametrize("n", [0, 2])
def test_tied_proposals_rank_as_the_reference_sorts_them(n: int) -> None:
    """Whole-number logits: proposals of one hypothesis, and of hypotheses with equal scores, tie exactly, and the
    reference breaks ties by (hypothesis, rank) as a stable sort does; so must the search, in both its forms (an
    unstable sort of the proposals fails this test)."""
    vocab, sentences, max_lens, beam, tied = 12, 3, [7, 9, 11], 3, 0
    for seed in range(8):
        outputs = _tree_search(seed, vocab, max_lens, beam, n, 0.0, ties=True)
        for s in range(sentences):
            expected = _brute_force(seed, s, vocab, 0.0, beam, max_lens[s], n, 0.6, ties=True)[:beam]
            assert [h.tokens for h in outputs[s]] == [t for t, _ in expected]
            scores = [h.score for h in outputs[s]]
            np.testing.assert_allclose(scores, [sc for _, sc in expected], rtol=1e-12)
            tied += len(set(scores)) < len(scores)
    assert tied > 0, "whole-number logits should leave some sentences with equally scored best hypotheses"


def _alone(seed: int, sentence: int, options: SearchOptions, vocab: int, eos_bias: float) -> list[Finished]:
    [out] = run_search(
        TreeStepper(1, vocab, seed, eos_bias, ids=[sentence]),
        [[A] * 3],
        options,
        vocab_size=vocab,
        bos_id=BOS,
        eos_id=EOS,
    )
    return out


@pytest.mark.parametrize("seed", range(6))
def test_sentences_admitted_mid_run_and_dropped_decode_as_alone(
    seed: int, chooser: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random arrivals, mixed options and cancellations in one running set: every sentence that finishes gets
    exactly what it gets alone, every admitted one is either answered once or was dropped, none twice. Switching,
    the set moves its hypotheses from links to arrays and back, mid-sentence."""
    moves: list[str] = []
    to_arrays, to_links = beam_search_module._Arrays.of, beam_search_module._Arrays.hypotheses

    def of(sentences, bos):  # type: ignore[no-untyped-def]
        moves.append("arrays")
        return to_arrays(sentences, bos)

    def hypotheses(self, sentences):  # type: ignore[no-untyped-def]
        moves.append("links")
        return to_links(self, sentences)

    monkeypatch.setattr(beam_search_module._Arrays, "of", staticmethod(of))
    monkeypatch.setattr(beam_search_module._Arrays, "hypotheses", hypotheses)
    rng, asks = np.random.default_rng(seed), np.random.default_rng(seed + 100)  # asks: who wants attention rows
    vocab, eos_bias, count = 11, [-1.0, 1.0][seed % 2], 14
    options = [
        SearchOptions(
            beam_size=int(rng.integers(1, 5)),
            length_penalty=float(rng.choice([0.6, 1.0, 1.4])),
            n_best=1 + int(rng.integers(0, 2)),
            max_len=int(rng.integers(3, 14)),
            no_repeat_ngram=int(rng.choice([0, 2, 3])),
            with_attention=bool(asks.random() < 0.5),
        )
        for _ in range(count)
    ]
    options = [o if o.n_best <= o.beam_size else replace(o, n_best=1) for o in options]
    stepper = TreeStepper(0, vocab, seed, eos_bias, ids=list(range(count)))
    beams = BeamSearch(stepper, vocab_size=vocab, bos_id=BOS, eos_id=EOS)
    results: dict[object, list[Finished]] = {}
    dropped: set[int] = set()
    arrived = 0
    while arrived < count or beams:
        if arrived < count and rng.random() < 0.5:
            n = min(int(rng.integers(1, 4)), count - arrived)
            beams.admit((i, [A] * 3, options[i]) for i in range(arrived, arrived + n))
            arrived += n
        if beams and rng.random() < 0.1:
            victim = int(rng.choice(beams.keys))  # type: ignore[arg-type]
            assert beams.drop([victim]) == [victim]
            dropped.add(victim)
        for key, out in beams.step():
            assert key not in results, f"sentence {key} answered twice"
            results[key] = out
    assert set(results) | dropped == set(range(count)) and not set(results) & dropped
    assert stepper.max_batch > 1
    if chooser == "switching":
        assert {"arrays", "links"} <= set(moves), moves
    for key, out in results.items():
        expected = _alone(seed, int(key), options[int(key)], vocab, eos_bias)  # type: ignore[call-overload]
        assert [h.tokens for h in out] == [h.tokens for h in expected], key
        assert [h.score for h in out] == [h.score for h in expected], key
        for got, alone in zip(out, expected, strict=True):  # one row a token when asked, each its own prefix's
            assert len(got.attention) == (len(got.tokens) if options[int(key)].with_attention else 0), key
            np.testing.assert_array_equal(got.attention, alone.attention)


def test_a_set_leaving_its_arrays_keeps_each_hypothesis_whole(chooser: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six sentences over four pieces that hardly ever end, guarding 2-grams: four leave after a few steps, and a set
    switching forms goes back to linked hypotheses with the two long ones mid-sentence. Those must go on banning
    every 2-gram they hold, the first token's included, and return all their tokens: each decodes as alone."""
    back: list[int] = []
    to_links = beam_search_module._Arrays.hypotheses

    def hypotheses(self, sentences):  # type: ignore[no-untyped-def]
        back.append(min(int(p) for p in self.ints[:, beam_search_module.POSITION]))
        return to_links(self, sentences)

    monkeypatch.setattr(beam_search_module._Arrays, "hypotheses", hypotheses)
    vocab, seed, never_eos, max_lens = 9, 5, -6.0, [3, 4, 5, 6, 15, 17]
    options = [
        SearchOptions(beam_size=2, n_best=2, max_len=m, no_repeat_ngram=2, with_attention=True) for m in max_lens
    ]
    stepper = TreeStepper(len(max_lens), vocab, seed, never_eos)
    out = run_search(stepper, [[A] * 3] * len(max_lens), options, vocab_size=vocab, bos_id=BOS, eos_id=EOS)
    if chooser == "switching":
        assert back and back[0] >= 4, back  # the long ones had tokens to carry over
    for sentence, got in enumerate(out):
        alone = _alone(seed, sentence, options[sentence], vocab, never_eos)
        assert [h.tokens for h in got] == [h.tokens for h in alone], sentence
        assert [h.score for h in got] == [h.score for h in alone], sentence
        for h, a in zip(got, alone, strict=True):
            np.testing.assert_array_equal(h.attention, a.attention)
            assert len(h.tokens) == len(h.attention)
    assert any(len(h.tokens) >= 10 for h in out[-1])


def test_a_long_sentence_widens_the_arrays_and_they_narrow_once_it_leaves(chooser: str) -> None:
    """A 40-token sentence runs beside a stream of 4-token ones, which keep arriving after it leaves: each decodes
    as alone; kept in arrays, the token columns double for the long one (16 -> 64) and halve back to 16 after it."""
    vocab, seed, never_eos = 9, 3, -50.0
    options = {0: SearchOptions(beam_size=2, max_len=40)}
    short = SearchOptions(beam_size=2, max_len=4)
    beams = BeamSearch(
        TreeStepper(0, vocab, seed, never_eos, ids=list(range(200))), vocab_size=vocab, bos_id=BOS, eos_id=EOS
    )
    beams.admit([(0, [A] * 3, options[0])])
    results: dict[object, list[Finished]] = {}
    widths: list[int] = []
    for _ in range(56):  # one arrival a step: the set never empties (which would start its arrays afresh)
        key = len(options)
        options[key] = short
        beams.admit([(key, [A] * 3, short)])
        results.update(beams.step())
        assert beams
        if beams._arrays is not None:
            widths.append(beams._arrays.hist.shape[2])
    while beams:
        results.update(beams.step())
    assert 0 in results and len(results) == len(options)
    for key, out in results.items():
        expected = _alone(seed, int(key), options[int(key)], vocab, never_eos)  # type: ignore[call-overload]
        assert [h.tokens for h in out] == [h.tokens for h in expected], key
        assert [h.score for h in out] == [h.score for h in expected], key
    assert len(results[0][0].tokens) == 40
    if chooser == "arrays":
        assert max(widths) == 64 and widths[-1] == 16


@pytest.mark.parametrize("guard", [0, 2])
def test_a_set_that_guards_n_grams_takes_arrays_from_fewer_sentences(
    chooser: str, guard: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GUARDED_ARRAYS_FROM for a set in which a sentence guards n-grams, ARRAYS_FROM for one in which none does; a
    set in arrays goes back to links below three quarters of its line, the guard read from its arrays."""
    if chooser != "walk":
        pytest.skip("sets both lines itself")
    monkeypatch.setattr(beam_search_module, "ARRAYS_FROM", 6)
    monkeypatch.setattr(beam_search_module, "GUARDED_ARRAYS_FROM", 4)
    stepper = TreeStepper(5, 9, 3, -6.0)
    beams = BeamSearch(stepper, vocab_size=9, bos_id=BOS, eos_id=EOS)
    options = SearchOptions(beam_size=2, max_len=12, no_repeat_ngram=guard)
    beams.admit((i, [A] * 3, options) for i in range(5))
    assert not beams.step()
    assert (beams._arrays is not None) == bool(guard)  # 5 sentences: at least 4, fewer than 6
    beams.drop([0, 1])
    assert not beams.step()
    assert (beams._arrays is not None) == bool(guard)  # 3: not below 4 * 3 // 4
    beams.drop([2])
    beams.step()
    assert beams._arrays is None  # 2: back to links
