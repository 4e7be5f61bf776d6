"""The ONNX engine decodes exactly like training/decode.py's PyTorch reference, whatever the batching."""

from __future__ import annotations

import json
import threading
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import inference.beam_search as beam_search_module
import inference.engine as engine_module
from core.graphs import GROW_KEY_SPLIT, KEY_LAYOUT
from core.translation import DecodeOptions, Translation
from inference.engine import Engine
from inference.static_state import Dims, StaticState
from testkit.running import drive
from testkit.synthetic import make_pairs
from training.checkpoint import load_model
from training.decode import Output, attention_map, beam_search, greedy, strip_eos
from training.model import Transformer

# Mixed lengths, plus inputs off the training distribution so that the model is unsure and ties and
# early EOS proposals actually happen.
PAIRS = make_pairs(9, seed=11, min_len=1, max_len=7)
TEXTS = [s for s, _ in PAIRS] + [
    "red",
    "hello world, this is new",
    "gold gold gold gold gold gold gold gold gold",
]
BEAM = DecodeOptions(beam_size=4, n_best=3, length_penalty=0.6)


@pytest.fixture(
    scope="module",
    params=[
        "dynamic",
        "dynamic-lanes",
        "static",
        "fused",
        "fused-static",
        "fused-static-lanes",
        "static-masked",
        "masked",
        "fused-masked",
    ],
)
def engine(request: pytest.FixtureRequest, tiny_bundle: Path) -> Engine:
    """The engine as it runs by default, with fixed-shape state (inference/static_state.py), which on a GPU
    replays each step as a CUDA graph, both on graphs exported with fused attention (training/fused.py; the fused
    static steps with the lean one where no sentence asks for attention rows, as on CUDA), and with caches that never
    move (inference/clock_state.py) on plain and fused graphs, and the fused static steps with a batch split into two
    running sets on two threads (``lanes``, from 2 sentences on), and the default graphs so split, and static steps
    whose self-attention is onnxruntime's DecoderMaskedMultiHeadAttention (``--static-attention decoder-masked``,
    with their lean step): all must decode exactly like the reference."""
    if request.param == "static-masked":
        bundle = request.getfixturevalue("tiny_static_masked_bundle")
        return Engine.load(bundle, provider="cpu", threads=1, graphs="cuda", static_step=True, lean_step=True)
    if request.param.endswith("masked"):
        bundle = request.getfixturevalue("tiny_masked_bundle")
        graphs = "cuda" if request.param.startswith("fused") else "main"
        return Engine.load(bundle, provider="cpu", threads=1, graphs=graphs, masked_step=True)
    if request.param == "static":
        bundle = request.getfixturevalue("tiny_static_bundle")
        return Engine.load(bundle, provider="cpu", threads=1, graphs="cuda", static_step=True)
    if request.param.endswith("lanes"):
        static = request.param.startswith("fused")
        bundle = request.getfixturevalue("tiny_fused_bundle") if static else tiny_bundle
        graphs = "cuda" if static else "auto"
        lanes = Engine.load(bundle, provider="cpu", threads=1, graphs=graphs, static_step=static, lanes=2)
        lanes.lane_sentences = 1
        return lanes
    if request.param.startswith("fused"):
        bundle = request.getfixturevalue("tiny_fused_bundle")
        static = request.param == "fused-static"
        graphs = "cuda" if static else "main"
        return Engine.load(bundle, provider="cpu", threads=1, graphs=graphs, static_step=static, lean_step=static)
    return Engine.load(tiny_bundle, provider="cpu", threads=1)


@pytest.fixture(scope="module")
def model(tiny_checkpoint: Path) -> Transformer:
    torch.set_num_threads(1)
    return load_model(tiny_checkpoint)[0]


@pytest.fixture(scope="module")
def sources(engine: Engine) -> list[list[int]]:
    return [engine.tokenize(t) for t in TEXTS]


def _max_len(options: DecodeOptions, source: list[int], model: Transformer) -> int:
    return options.max_steps(len(source), model.config.max_positions)


def _in_batches(engine: Engine, sources: list[list[int]], options: DecodeOptions, size: int) -> list[Translation]:
    out: list[Translation] = []
    for start in range(0, len(sources), size):
        out += engine.translate_ids(sources[start : start + size], options)
    return out


def _assert_same(got: Translation, expected: list[Output], eos_id: int) -> None:
    assert len(got.hypotheses) == len(expected)
    for hyp, ref in zip(got.hypotheses, expected, strict=True):
        assert hyp.token_ids == strip_eos(ref.tokens, eos_id)
        assert hyp.score == pytest.approx(ref.score, abs=1e-4)
        np.testing.assert_allclose(hyp.token_logprobs, ref.token_logprobs, atol=1e-4)


@pytest.fixture(scope="module")
def reference_greedy(model: Transformer, sources: list[list[int]]) -> list[Output]:
    options = DecodeOptions(beam_size=1)
    return greedy(model, sources, [_max_len(options, s, model) for s in sources])


@pytest.fixture(scope="module")
def reference_beam(model: Transformer, sources: list[list[int]]) -> list[list[Output]]:
    return [
        beam_search(model, s, BEAM.beam_size, _max_len(BEAM, s, model), BEAM.length_penalty, BEAM.n_best)
        for s in sources
    ]


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_greedy_equals_reference(
    engine: Engine, sources: list[list[int]], reference_greedy: list[Output], batch_size: int
) -> None:
    got = _in_batches(engine, sources, DecodeOptions(beam_size=1), batch_size)
    for translation, ref in zip(got, reference_greedy, strict=True):
        _assert_same(translation, [ref], engine.eos_id)
    # On sentences like its training data (2-6 words) the tiny model mostly gets the reversal right.
    seen = [(t, p) for t, p in zip(got, PAIRS, strict=False) if 2 <= len(p[0].split()) <= 6]
    correct = sum(t.best.text == target for t, (_, target) in seen)
    assert seen and correct >= len(seen) / 2, "the tiny model should have learned its task"
    distinct = {tuple(t.best.token_ids) for t in got}
    assert len(distinct) > len(got) // 2, "the tiny model should emit real, varied sequences"


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_beam_equals_reference(
    engine: Engine, sources: list[list[int]], reference_beam: list[list[Output]], batch_size: int
) -> None:
    got = _in_batches(engine, sources, BEAM, batch_size)
    for translation, ref in zip(got, reference_beam, strict=True):
        _assert_same(translation, ref, engine.eos_id)


def test_batching_does_not_change_results(engine: Engine, sources: list[list[int]]) -> None:
    one = _in_batches(engine, sources, BEAM, 1)
    mixed = engine.translate_ids(sources[::-1], BEAM)[::-1]
    for a, b in zip(one, mixed, strict=True):
        assert [h.token_ids for h in a.hypotheses] == [h.token_ids for h in b.hypotheses]
        np.testing.assert_allclose([h.score for h in a.hypotheses], [h.score for h in b.hypotheses], atol=1e-5)


def test_max_length_finishes_hypotheses_like_the_reference(
    engine: Engine, model: Transformer, sources: list[list[int]]
) -> None:
    options = DecodeOptions(beam_size=3, n_best=3, max_length=3)
    got = engine.translate_ids(sources[:6], options)
    for translation, source in zip(got, sources[:6], strict=True):
        ref = beam_search(model, source, 3, 3, options.length_penalty, 3)
        _assert_same(translation, ref, engine.eos_id)
        assert all(len(h.token_logprobs) <= 3 for h in translation.hypotheses)


def test_n_best_is_sorted_and_distinct(engine: Engine, sources: list[list[int]]) -> None:
    for translation in engine.translate_ids(sources, DecodeOptions(beam_size=5, n_best=5)):
        scores = [h.score for h in translation.hypotheses]
        assert 1 <= len(scores) <= 5 and scores == sorted(scores, reverse=True)
        assert len({tuple(h.token_ids) for h in translation.hypotheses}) == len(scores)
        for h in translation.hypotheses:  # score = sum(log p) / len ** 1.0, EOS counted
            assert h.score == pytest.approx(sum(h.token_logprobs) / len(h.token_logprobs), abs=1e-6)


def test_attention_rows_sum_to_one_and_match_the_reference(
    engine: Engine, model: Transformer, sources: list[list[int]]
) -> None:
    options = DecodeOptions(beam_size=2, n_best=2, return_attention=True)
    got = engine.translate(TEXTS[:5], options)
    for text, translation, source in zip(TEXTS, got, sources[:5], strict=False):
        assert len(translation.source_pieces) == len(source)
        for hyp in translation.hypotheses:
            assert hyp.attention is not None
            assert hyp.attention.shape == (len(hyp.token_ids), len(source))
            np.testing.assert_allclose(hyp.attention.sum(axis=1), 1.0, atol=1e-5)
            assert (hyp.attention >= 0).all()
            full = attention_map(model, source, hyp.token_ids + [engine.eos_id]).numpy()
            expected = full[: len(hyp.token_ids), : len(source)]
            expected = expected / expected.sum(axis=1, keepdims=True)
            np.testing.assert_allclose(hyp.attention, expected, atol=1e-5)
        alignment = translation.alignment
        assert alignment is not None
        assert alignment.source_words == text.split()
        assert alignment.target_words == translation.best.text.split()
        assert len(alignment.weights) == len(alignment.target_words) == len(alignment.links)
        assert all(len(row) == len(alignment.source_words) for row in alignment.weights)
        assert all(0 <= link[0] < len(alignment.source_words) for link in alignment.links)


@pytest.mark.parametrize("n", [1, 2])
def test_no_repeat_ngram_equals_reference(
    engine: Engine, model: Transformer, sources: list[list[int]], reference_beam: list[list[Output]], n: int
) -> None:
    options = DecodeOptions(beam_size=4, n_best=3, length_penalty=0.6, no_repeat_ngram_size=n)
    got = _in_batches(engine, sources, options, 5)
    changed = 0
    for translation, source, plain in zip(got, sources, reference_beam, strict=True):
        ref = beam_search(model, source, 4, _max_len(options, source, model), 0.6, 3, no_repeat_ngram=n)
        _assert_same(translation, ref, engine.eos_id)
        for hyp in translation.hypotheses:
            grams = [tuple(hyp.token_ids[j : j + n]) for j in range(len(hyp.token_ids) - n + 1)]
            assert len(grams) == len(set(grams)), f"{hyp.token_ids} repeats an {n}-gram"
        changed += [h.token_ids for h in translation.hypotheses] != [strip_eos(o.tokens, engine.eos_id) for o in plain]
    assert changed > 0, "some hypotheses of the tiny model repeat pieces; the guard must change them"
    greedy_options = DecodeOptions(beam_size=1, no_repeat_ngram_size=n)
    ref_greedy = greedy(model, sources, [_max_len(greedy_options, s, model) for s in sources], no_repeat_ngram=n)
    for translation, ref_one in zip(engine.translate_ids(sources, greedy_options), ref_greedy, strict=True):
        _assert_same(translation, [ref_one], engine.eos_id)


MIXED = [
    BEAM,
    DecodeOptions(beam_size=1),
    DecodeOptions(beam_size=3, n_best=2, length_penalty=1.4, no_repeat_ngram_size=2),
    DecodeOptions(beam_size=2, max_length=4, return_attention=True),
]


def _reference(model: Transformer, source: list[int], options: DecodeOptions) -> list[Output]:
    max_len = _max_len(options, source, model)
    if options.beam_size == 1:
        return greedy(model, [source], [max_len], options.length_penalty, options.no_repeat_ngram_size)
    return beam_search(
        model,
        source,
        options.beam_size,
        max_len,
        options.length_penalty,
        options.n_best,
        no_repeat_ngram=options.no_repeat_ngram_size,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_running_set_admits_between_steps_like_the_reference(
    engine: Engine, model: Transformer, sources: list[list[int]], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sentences join a running set at random steps, each with its own options, some are dropped: every
    answered one equals the PyTorch reference decoding it alone, token for token; none is lost or doubled.
    With seeds 1 and 2 the dynamic state opens a cohort at nearly every admission (RunningSet), up to four; with
    seed 2 every step keeps the hypotheses in arrays and chooses with numpy (the search's path for large sets,
    ARRAYS_FROM); with seed 1 a set moves between links and arrays as it passes 3 sentences."""
    cohorts = engine.cohorts > 1 and seed > 0
    monkeypatch.setattr(engine_module, "COHORT_CELLS", 1 if cohorts else 10**9)
    for line in ("ARRAYS_FROM", "GUARDED_ARRAYS_FROM"):
        monkeypatch.setattr(beam_search_module, line, {0: 10**9, 1: 3, 2: 1}[seed])
    graphs: list[str] = []
    run, resize = Engine.run_graph, StaticState._resize

    def counted(self: Engine, role: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        graphs.append(role)
        return run(self, role, *args, **kwargs)

    def resized(self: StaticState, dims: Dims) -> None:
        graphs.append("resize")
        resize(self, dims)

    monkeypatch.setattr(Engine, "run_graph", counted)
    monkeypatch.setattr(StaticState, "_resize", resized)
    rng = np.random.default_rng(seed)
    order = [int(i) for i in rng.permutation(len(sources) * 2)]  # every source twice, as different requests
    jobs = [(key, sources[key % len(sources)], MIXED[int(rng.integers(len(MIXED)))]) for key in order]
    options_of = {key: options for key, _, options in jobs}
    running = engine.running_set()
    cohorts_seen = [0]
    results, dropped, widest = drive(running, jobs, rng, lambda: cohorts_seen.append(running.cohort_count))
    most_cohorts = max(cohorts_seen)
    assert len(results) + len(dropped) == len(sources) * 2 and widest > 1
    assert (most_cohorts > 1) if cohorts else most_cohorts == 1
    if engine.static_step:  # sentences placed into free slots; the state moved to larger buckets
        assert {"place", "resize"} <= set(graphs) and not {"merge", "select", "trim"} & set(graphs)
        # with a lean static step the steps took both graphs, as each asked for attention rows or not
        steps = {lean for _, lean, _ in engine.static_pool._sessions}
        assert steps == ({False, True} if engine.static_lean_path else {False}), steps
    elif engine.masked_step:  # nothing gathered, merged or trimmed: the encoder, the masked step, its moves
        assert {"encoder", "decoder_masked"} <= set(graphs) <= {"encoder", "decoder_masked", "masked_move"}
    else:
        expected = {"select", "trim"} | (set() if cohorts else {"merge"})  # cohorts take most arrivals
        assert expected <= set(graphs), "the state graphs should all have run"
    for key, translation in results.items():
        source = sources[int(key) % len(sources)]  # type: ignore[call-overload]
        _assert_same(translation, _reference(model, source, options_of[key]), engine.eos_id)


def _admit_at_random_like_the_reference(engine: Engine, model: Transformer, sources: list[list[int]]) -> None:
    """Every source twice, two at a time into one running set at random steps, each with one of ``MIXED``'s
    options: every one answered, each answer the reference's."""
    rng = np.random.default_rng(7)
    jobs = [(i, sources[i % len(sources)], MIXED[i % len(MIXED)]) for i in range(len(sources) * 2)]
    running, results = engine.running_set(), {}
    while jobs or running:
        if jobs and (not running or rng.random() < 0.3):
            running.admit(jobs[:2])
            jobs = jobs[2:]
        results.update(running.step())
    assert len(results) == len(sources) * 2
    for key, translation in results.items():
        _assert_same(
            translation, _reference(model, sources[key % len(sources)], MIXED[key % len(MIXED)]), engine.eos_id
        )


@pytest.mark.parametrize("mover", ["grow graph", "host", "encoder buckets"])
def test_static_state_moving_through_every_bucket_decodes_like_the_reference(
    tiny_static_bundle: Path,
    model: Transformer,
    monkeypatch: pytest.MonkeyPatch,
    mover: str,
) -> None:
    """The smallest buckets (1 hypothesis, 2 source positions, 4 cache columns, where a new set starts), so a running
    set moves through every kind of bucket change mid-run: more slots, wider sources, more hypotheses, more cache
    columns (the cache is right-aligned: its old columns move to the end). Each answer equals the reference's,
    whether the state moves on the device (the bundle's grow graph) or through the host (bundles exported without
    it)."""
    import inference.static_state as static_state

    monkeypatch.setattr(static_state, "MIN_HYPS", 1)
    monkeypatch.setattr(static_state, "MIN_WIDTH", 2)
    monkeypatch.setattr(static_state, "MIN_COLUMNS", 4)
    monkeypatch.setattr(static_state, "COLUMNS_SLACK", -1000)  # a new set starts at the fewest columns: they grow
    engine = Engine.load(tiny_static_bundle, provider="cpu", threads=1, graphs="cuda", static_step=True)
    sources = [engine.tokenize(t) for t in TEXTS]  # not the module's fixture: it runs once per engine kind
    assert "grow" in engine.sessions and "compact" in engine.sessions
    assert engine.manifest["variants"]["cuda"]["encoder"] == "padded" and not engine.static_encoder  # CPU: no capture
    if mover == "host":  # as a bundle exported before the grow and compact graphs: no compaction either
        del engine.sessions["grow"], engine.sessions["compact"]
    if mover == "encoder buckets":  # what admissions do on CUDA: the encoder in fixed sizes, one-EOS filler rows
        engine.static_encoder = True
    moves: list[tuple[Dims, Dims]] = []
    resize = StaticState._resize

    def resized(self: StaticState, dims: Dims) -> None:
        if self.buffers is not None:
            moves.append((self.buffers.dims, dims))
        resize(self, dims)

    monkeypatch.setattr(StaticState, "_resize", resized)
    compact = StaticState._compact

    def compacted(self: StaticState) -> None:
        before = self.buffers.dims if self.buffers else None
        compact(self)
        moves.append((before, self.buffers.dims))  # type: ignore[arg-type,union-attr]

    monkeypatch.setattr(StaticState, "_compact", compacted)
    _admit_at_random_like_the_reference(engine, model, sources)
    grew = {
        axis
        for old, new in moves
        for axis in ("slots", "hyps", "width", "columns")
        if getattr(new, axis) > getattr(old, axis)
    }
    assert grew == {"slots", "hyps", "width", "columns"}, moves
    shrank = [(old, new) for old, new in moves if new.slots < old.slots]
    assert bool(shrank) == (mover != "host"), moves
    if mover == "encoder buckets":  # buckets of several sizes served the admissions
        assert len(engine.static_pool._encoders) >= 2, engine.static_pool._encoders.keys()


@pytest.mark.parametrize(("graphs", "mover"), [("main", "move graph"), ("cuda", "move graph"), ("main", "host")])
def test_caches_that_never_move_decode_like_the_reference_through_every_move(
    tiny_masked_bundle: Path, model: Transformer, monkeypatch: pytest.MonkeyPatch, graphs: str, mover: str
) -> None:
    """The masked step's state (inference/clock_state.py) at its smallest sizes (1 hypothesis, 2 source positions, 4
    cache columns), so that a running set with mid-run admissions goes through every move: more slots, wider sources,
    more hypotheses, the clock's columns moved to the front and the buffers grown, fewer slots. Each answer equals
    the reference's, on plain graphs and on fused ones, the caches moved by the bundle's masked_move graph or, as
    for a bundle without it, through the host."""
    import inference.clock_state as clock_state
    from inference.clock_state import ClockState

    monkeypatch.setattr(clock_state, "MIN_HYPS", 1)
    monkeypatch.setattr(clock_state, "MIN_WIDTH", 2)
    monkeypatch.setattr(clock_state, "MIN_COLUMNS", 4)
    monkeypatch.setattr(clock_state, "COLUMNS_PER_SOURCE", 0)  # a new set starts at the fewest columns: they move
    engine = Engine.load(tiny_masked_bundle, provider="cpu", threads=1, graphs=graphs, masked_step=True)
    assert "masked_move" in engine.sessions
    if mover == "host":
        del engine.sessions["masked_move"]
    sources = [engine.tokenize(t) for t in TEXTS]  # not the module's fixture: it runs once per engine kind
    moves: list[tuple[tuple[int, ...], tuple[int, ...], int]] = []
    rebuild = ClockState._rebuild

    def rebuilt(self: ClockState, order: list[int], *sizes: int, start: int = 0) -> None:
        before = (self.slots, self.hyps, self.width, self.columns)
        rebuild(self, order, *sizes, start=start)
        if before[0]:
            moves.append((before, (self.slots, self.hyps, self.width, self.columns), start))

    monkeypatch.setattr(ClockState, "_rebuild", rebuilt)
    _admit_at_random_like_the_reference(engine, model, sources)
    axes = ("slots", "hyps", "width", "columns")
    grew = {axis for old, new, _ in moves for axis, a, b in zip(axes, old, new, strict=True) if b > a}
    assert grew == set(axes), moves
    assert any(start > 0 for _, _, start in moves), moves  # the clock's columns moved to the front
    assert any(new[0] < old[0] for old, new, _ in moves), moves  # fewer slots


def test_the_static_pool_keeps_at_most_its_byte_budget_and_translates_the_same(
    tiny_static_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Buffers no running set uses are kept for reuse up to ``POOL_FREE_BYTES``; past it the longest unused go,
    and a later set of their sizes allocates afresh and translates the same."""
    import inference.static_state as static_state

    options = DecodeOptions(beam_size=3, max_length=24)
    texts = TEXTS[:9]
    batches = [texts[:1], texts[:5], texts[:9], texts[:1], texts[:5]]

    def run(budget: int) -> tuple[list[list[list[int]]], int, int]:
        monkeypatch.setattr(static_state, "POOL_FREE_BYTES", budget)
        engine = Engine.load(tiny_static_bundle, provider="cpu", threads=1, graphs="cuda", static_step=True)
        out = [[t.best.token_ids for t in engine.translate(batch, options)] for batch in batches]
        kept = sum(len(free) for free in engine.static_pool._free.values())
        return out, engine.static_pool.free_bytes, kept

    unbounded, unbounded_bytes, unbounded_kept = run(1 << 40)
    assert unbounded_kept >= 3  # one per bucket size the batches went through
    budget = unbounded_bytes // 2
    bounded, bounded_bytes, bounded_kept = run(budget)
    assert bounded == unbounded
    assert 0 < bounded_bytes <= budget and bounded_kept < unbounded_kept


def test_lanes_step_each_set_on_a_thread_and_sessions_of_its_own(
    tiny_fused_bundle: Path, model: Transformer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``lanes=2`` a batch decodes as two running sets, one on the caller's thread and one on the engine's lane
    thread, each stepping on static sessions of its own (two lanes, every bucket they met opened in each), and the
    translations come back in order, each the reference's; a batch under two lanes' worth decodes on the caller
    alone; a bad source is refused before either lane decodes, as one set refuses it before admitting any; a lane
    that fails fails the call, after the others stopped, and the engine serves on. With the dynamic state the second
    lane steps on a decoder session of its own."""
    engine = Engine.load(tiny_fused_bundle, provider="cpu", threads=1, graphs="cuda", static_step=True, lanes=2)
    engine.lane_sentences = 3
    sources = [engine.tokenize(t) for t in TEXTS]
    threads: dict[int, list[str]] = {}
    decode = engine._decode

    def recorded(items: list[tuple[int, object]], options: DecodeOptions) -> dict:
        threads.setdefault(threading.get_ident(), []).extend(str(key) for key, _ in items)
        return decode(items, options)

    monkeypatch.setattr(engine, "_decode", recorded)
    got = engine.translate_ids(sources, BEAM)
    assert len(threads) == 2 and threading.get_ident() in threads
    assert sorted(key for keys in threads.values() for key in keys) == sorted(str(i) for i in range(len(sources)))
    for source, translation in zip(sources, got, strict=True):
        _assert_same(translation, _reference(model, source, BEAM), engine.eos_id)
    lanes = {lane for _, _, lane in engine.static_pool._sessions}
    assert lanes == {0, 1}, engine.static_pool._sessions.keys()
    threads.clear()
    engine.translate_ids(sources[:5], BEAM)  # 5 // 3: one lane
    assert list(threads) == [threading.get_ident()]
    bad = [*sources[:6], [engine.vocab_size + 5]]
    threads.clear()
    with pytest.raises(ValueError, match="source 6, position 0"):
        engine.translate_ids(bad, BEAM)
    assert not threads  # refused before either lane decoded
    caller = threading.get_ident()

    def failing(items: list[tuple[int, object]], options: DecodeOptions) -> dict:
        if threading.get_ident() != caller:
            raise RuntimeError("the lane failed")
        threads.setdefault(caller, []).append("decoded")
        return decode(items, options)

    monkeypatch.setattr(engine, "_decode", failing)
    with pytest.raises(RuntimeError, match="the lane failed"):
        engine.translate_ids(sources, BEAM)
    assert threads == {caller: ["decoded"]}  # the caller's lane ran to its end before the call raised
    monkeypatch.setattr(engine, "_decode", decode)
    assert engine.translate_ids(sources[:6], BEAM)[0].best.token_ids == got[0].best.token_ids  # still serves
    assert engine.lane_sessions == {}  # fused static steps: the lanes' own sessions are the static ones
    dynamic = Engine.load(tiny_fused_bundle, provider="cpu", threads=1, lanes=2)
    dynamic.lane_sentences = 3
    expected = Engine.load(tiny_fused_bundle, provider="cpu", threads=1).translate_ids(sources, BEAM)
    assert [t.best.token_ids for t in dynamic.translate_ids(sources, BEAM)] == [t.best.token_ids for t in expected]
    assert set(dynamic.lane_sessions) == {("decoder", 1)}  # the second lane stepped on a decoder session of its own
    numbers: list[int] = []
    for _ in range(3):  # threads past the lanes share them: no more than two copies of the decoder open
        thread = threading.Thread(target=lambda: numbers.append(dynamic.lane()))
        thread.start()
        thread.join()
    assert len(numbers) == 3 and set(numbers) <= {0, 1}
    with pytest.raises(engine_module.EngineError, match="lanes=5"):
        Engine.load(tiny_fused_bundle, provider="cpu", threads=1, lanes=5)


def test_a_decoder_masked_static_step_binds_its_providers_key_layout_and_is_refused_where_it_cannot_decode(
    tiny_static_masked_bundle: Path,
) -> None:
    """A static step exported with ``--static-attention decoder-masked`` gets the key layout of the provider's
    DecoderMaskedMultiHeadAttention as its ``key_layout`` input's shape: plain (1, d_head) on the CPU, (d_head / x, x)
    on CUDA, x values in 16 bytes. On CUDA it is refused where it would decode wrong tokens or not run: a session-45
    export (no such input: its gather moved plain keys), a grow without the keys' own view, heads CUDA's kernel does
    not take (the tiny model's 16). The default static attention binds nothing."""
    manifest = json.loads((tiny_static_masked_bundle / "manifest.json").read_text(encoding="utf-8"))
    graph_set = manifest["variants"]["cuda"]
    assert graph_set["static_attention"] == "decoder-masked"
    listed = graph_set["graphs"]
    assert KEY_LAYOUT in listed["static_decoder"]["inputs"] and GROW_KEY_SPLIT in listed["grow"]["inputs"]

    def check(provider: str, float_type: type = np.float32, d_head: int = 16) -> np.ndarray | None:
        engine = types.SimpleNamespace(provider=provider, float_type=float_type)
        manifest["architecture"]["d_head"] = d_head
        return engine_module.check_static_attention(engine, manifest, "cuda", listed)  # type: ignore[arg-type]

    cuda = "CUDAExecutionProvider"
    assert check("CPUExecutionProvider").shape == (1, 16)  # type: ignore[union-attr]
    with pytest.raises(engine_module.EngineError, match="heads of"):
        check(cuda)
    assert check(cuda, np.float32, 64).shape == (16, 4)  # type: ignore[union-attr]
    assert check(cuda, np.float16, 64).shape == (8, 8)  # type: ignore[union-attr]
    assert check(cuda, np.float16, 32).shape == (4, 8)  # type: ignore[union-attr]
    del listed["grow"]["inputs"][GROW_KEY_SPLIT]
    with pytest.raises(engine_module.EngineError, match="re-export"):
        check(cuda, np.float16, 64)
    del listed["static_decoder"]["inputs"][KEY_LAYOUT]  # session 45's export
    with pytest.raises(engine_module.EngineError, match="re-export"):
        check(cuda, np.float16, 64)
    assert check("CPUExecutionProvider") is None  # plain keys, which the CPU's kernel reads
    del graph_set["static_attention"]  # multihead, the default, is not recorded
    assert check(cuda, np.float16, 64) is None


def test_the_masked_step_is_refused_on_cuda_for_heads_its_kernel_does_not_take(
    tiny_masked_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA's DecoderMaskedMultiHeadAttention takes heads of 32, 64 or 128 values: a masked step on CUDA with the tiny
    model's 16 is refused before any session opens, saying what to do (onnxruntime would fail its first step)."""
    monkeypatch.setattr(engine_module, "choose_providers", lambda _: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    with pytest.raises(engine_module.EngineError, match="heads of 32, 64, 128 values .* run without masked_step"):
        Engine.load(tiny_masked_bundle, provider="cuda", masked_step=True)
