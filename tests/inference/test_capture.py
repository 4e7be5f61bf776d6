"""The capture gate (inference/capture.py): a CUDA graph capture runs with no other device work in the process.

No GPU here: the gate is checked on its own with threads, and on the engine with static steps whose engine is told
it captures (``cuda_graph``; the CPU provider ignores the capture options), so the runs that would capture on a GPU
are the ones that enter exclusive."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from core.translation import DecodeOptions
from inference import capture, static_state
from inference.capture import CaptureGate
from inference.engine import Engine
from inference.static_state import CAPTURE_RUNS, OPENED, REUSE_BYTES, Dims, buffer_bytes, ladder, warm
from testkit.running import graph_runs
from testkit.synthetic import make_pairs


class Witness:
    """Who is inside the gate, checked at every entry: never a capture beside anything else."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shared: set[int] = set()
        self.exclusive: set[int] = set()
        self.violations: list[str] = []

    def enter(self, kind: str) -> None:
        me = threading.get_ident()
        with self.lock:
            others_shared = self.shared - {me}
            if kind == "exclusive" and (others_shared or self.exclusive):
                self.violations.append(f"capture beside {len(others_shared)} shared, {len(self.exclusive)} captures")
            if kind == "shared" and self.exclusive - {me}:
                self.violations.append("shared work during another thread's capture")
            (self.exclusive if kind == "exclusive" else self.shared).add(me)

    def leave(self, kind: str) -> None:
        with self.lock:
            (self.exclusive if kind == "exclusive" else self.shared).discard(threading.get_ident())


def test_a_capture_waits_for_shared_work_and_holds_new_work_back() -> None:
    gate = CaptureGate()
    inside, release = threading.Event(), threading.Event()
    order: list[str] = []

    def worker() -> None:
        with gate.shared():
            inside.set()
            release.wait(5)
            order.append("shared done")

    def capturer() -> None:
        with gate.exclusive():
            order.append("capture")

    def late() -> None:
        with gate.shared():
            order.append("late shared")

    a = threading.Thread(target=worker)
    a.start()
    assert inside.wait(5)
    b = threading.Thread(target=capturer)
    b.start()
    time.sleep(0.1)
    c = threading.Thread(target=late)  # arrives while the capture waits: goes after it
    c.start()
    time.sleep(0.1)
    assert order == []
    release.set()
    for t in (a, b, c):
        t.join(5)
    assert order == ["shared done", "capture", "late shared"]
    assert gate.captures == 1


def test_nested_entries_and_two_threads_upgrading_at_once_do_not_deadlock() -> None:
    gate = CaptureGate()
    both_inside = threading.Barrier(2, timeout=5)
    done: list[int] = []

    def upgrade(n: int) -> None:
        with gate.shared(), gate.shared():
            both_inside.wait()  # both hold shared, then both ask to capture
            with gate.exclusive(), gate.shared(), gate.exclusive():  # nested in its own capture: no wait
                done.append(n)
            with gate.shared():
                pass

    threads = [threading.Thread(target=upgrade, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert sorted(done) == [0, 1] and gate.captures == 2


def test_under_load_no_capture_ever_runs_beside_other_work() -> None:
    gate, witness = CaptureGate(), Witness()

    def entered(kind: str) -> None:
        witness.enter(kind)
        time.sleep(random.random() / 2000)
        witness.leave(kind)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(200):
            if rng.random() < 0.1:
                with gate.shared():  # a capture asked for from inside shared work, as a running set's step does
                    entered("shared")
                    with gate.exclusive():
                        entered("exclusive")
            else:
                with gate.shared():
                    entered("shared")

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(worker, range(6)))
    assert witness.violations == []
    assert gate.captures > 0


def _capturing(bundle: Path, monkeypatch: pytest.MonkeyPatch, **load: Any) -> Engine:
    gate = CaptureGate()
    monkeypatch.setattr(capture, "GATE", gate)
    monkeypatch.setattr("inference.static_state.GATE", gate)
    monkeypatch.setattr("inference.engine.GATE", gate)
    engine = Engine.load(bundle, provider="cpu", static_step=True, **load)
    engine.cuda_graph = engine.static_encoder = True  # what Engine.load sets on CUDA for this bundle
    del engine.sessions["compact"]  # every translation then runs the same buckets: the counts below are exact
    return engine


@pytest.fixture()
def capturing_engine(tiny_static_bundle: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    """Static steps told that they capture (what ``cuda_graph`` does on CUDA), with a fresh gate to count on."""
    return _capturing(tiny_static_bundle, monkeypatch)


def test_the_runs_that_capture_are_exclusive_once_per_binding_and_thread(capturing_engine: Engine) -> None:
    """A step binding or an encoder bucket enters the gate exclusive for its first ``CAPTURE_RUNS`` runs on a
    thread (onnxruntime runs a graph id twice, then captures it on that thread), shared after: replays."""

    gate, pool = static_state.GATE, capturing_engine.static_pool
    texts = [source for source, _ in make_pairs(5, seed=3)]
    options = DecodeOptions(beam_size=3, max_length=20)

    def capturing_runs(thread: int) -> int:
        kept = [buffers for free in pool._free.values() for buffers in free]
        graphs = [b for buffers in kept for b in [*buffers.bindings.values(), *filter(None, [buffers.into])]]
        runs = [graph.runs.get(thread, 0) for graph in [*graphs, *pool._encoders.values()]]
        return sum(min(n, CAPTURE_RUNS) for n in runs)

    me = threading.get_ident()
    first = [t.best.text for t in capturing_engine.translate(texts, options)]
    assert len(pool._encoders) == 1 and gate.captures == capturing_runs(me) > 0
    for _ in range(3):
        assert [t.best.text for t in capturing_engine.translate(texts, options)] == first
    settled = gate.captures
    assert settled == capturing_runs(me)
    assert [t.best.text for t in capturing_engine.translate(texts, options)] == first
    assert gate.captures == settled  # every graph ran three times on this thread: replays only
    with ThreadPoolExecutor(1) as other:  # onnxruntime keeps graphs per thread: another thread captures again
        assert [t.best.text for t in other.submit(capturing_engine.translate, texts, options).result()] == first
        thread = other.submit(threading.get_ident).result()
    assert gate.captures == settled + capturing_runs(thread) and capturing_runs(thread) > 0


def test_an_empty_set_admits_without_place_into_buffers_of_its_encoder_buckets_size(
    capturing_engine: Engine, tiny_static_bundle: Path
) -> None:
    """An empty set whose buffers are the size of its admission's encoder bucket has the encoder write into them
    (a binding of the bucket's session of its own, captured apart): sentences translated one at a time run no
    ``place`` (~2.9 ms a call on an H200), a set admitting beside running sentences does, and both translate as an
    engine without static steps."""
    engine = capturing_engine
    reference = Engine.load(tiny_static_bundle, provider="cpu")
    roles: list[str] = []
    run_graph = engine.run_graph

    def recorded(role: str, *args: Any, **kwargs: Any) -> Any:
        roles.append(role)
        return run_graph(role, *args, **kwargs)

    engine.run_graph = recorded  # type: ignore[method-assign]
    texts = [source for source, _ in make_pairs(6, seed=4)]
    options = DecodeOptions(beam_size=4, max_length=30)

    def alone(text: str) -> list[int]:
        return reference.translate([text], options)[0].best.token_ids

    for _ in range(2):  # the second time through, the bindings' graphs are replayed
        assert [engine.translate([text], options)[0].best.token_ids for text in texts] == [alone(t) for t in texts]
    assert "place" not in roles
    kept = [buffers for free in engine.static_pool._free.values() for buffers in free]
    assert any(buffers.into for buffers in kept)
    running, done = engine.running_set(), {}
    running.admit([(0, texts[0], options)])
    done.update(running.step())
    running.admit([(i, text, options) for i, text in enumerate(texts[1:3], start=1)])
    while running:
        done.update(running.step())
    assert "place" in roles
    assert {key: t.best.token_ids for key, t in done.items()} == {i: alone(texts[i]) for i in range(3)}


def test_an_empty_set_in_a_larger_open_bucket_has_its_encoder_write_there_without_place(
    capturing_engine: Engine, tiny_static_bundle: Path
) -> None:
    """A lone sentence whose set takes an open bucket wider than it needs (``BufferPool.fitting``) runs the encoder
    bucket of that bucket's size, which writes into the buffers: still no ``place`` (a call cost 10 ms on an H100,
    session 42), the same translations."""
    engine = capturing_engine
    reference = Engine.load(tiny_static_bundle, provider="cpu")
    wide = Dims(1, 4, 32, 32)  # twice the source width a short sentence needs, within REUSE_BYTES of its own
    engine.static_pool.release(engine.static_pool.acquire(wide))
    roles = graph_runs(engine)
    texts = [source for source, _ in make_pairs(4, seed=5, min_len=1, max_len=4)]
    assert all(len(engine.tokenize(text)) < 16 for text in texts)  # each needs the 16-wide bucket only
    options = DecodeOptions(beam_size=4, max_length=12)
    got = [engine.translate([text], options)[0].best.token_ids for text in texts]
    assert got == [reference.translate([text], options)[0].best.token_ids for text in texts]
    assert "place" not in roles
    assert engine.static_pool.opened == {wide}  # the wide bucket served them all
    assert set(engine.static_pool._encoders) == {(1, 32)} and engine.static_pool._free[wide][0].into is not None


def test_a_new_set_starts_with_columns_for_its_median_source_and_a_lone_sentence_never_grows(
    capturing_engine: Engine, tiny_static_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A set's first admission sizes its cache for the median source plus ``COLUMNS_SLACK`` columns (on an H100 a
    ``grow`` call cost ~2.4 ms, ten batch-1 steps): a lone sentence's outputs within that never move the set, and
    translate as the engine without static steps; starting at the fewest columns, the same sentences grow."""
    from inference.static_state import COLUMNS_SLACK, MIN_WIDTH, bucket

    monkeypatch.setattr(static_state, "MIN_COLUMNS", 4)  # the tiny model's sentences would all fit 32
    engine = capturing_engine
    reference = Engine.load(tiny_static_bundle, provider="cpu")
    texts = [source for source, _ in make_pairs(4, seed=6, min_len=3, max_len=6)]
    for slack, grows in ((COLUMNS_SLACK, False), (-1000, True)):
        monkeypatch.setattr(static_state, "COLUMNS_SLACK", slack)
        roles = graph_runs(engine)
        for text in texts:
            n = len(engine.tokenize(text))
            options = DecodeOptions(beam_size=4, max_length=n + COLUMNS_SLACK - 1)  # positions below n + 8
            assert engine.translate([text], options)[0].best.token_ids == (
                reference.translate([text], options)[0].best.token_ids
            )
            if not grows:
                assert Dims(1, 4, bucket(n + 1, MIN_WIDTH), bucket(n + COLUMNS_SLACK, 4)) in engine.static_pool.opened
        assert ("grow" in roles) is grows
    # a set admitted together takes its median source's columns, not its longest's (all its sentences advance as one)
    monkeypatch.setattr(static_state, "COLUMNS_SLACK", COLUMNS_SLACK)
    token = min(4, engine.vocab_size - 1)
    engine.translate_ids([[token] * 3, [token] * 4, [token] * 30], DecodeOptions(beam_size=4, max_length=6))
    assert Dims(4, 4, bucket(31, MIN_WIDTH), bucket(4 + COLUMNS_SLACK, 4)) in engine.static_pool.opened


def test_running_sets_in_several_threads_translate_as_one_thread_does(capturing_engine: Engine) -> None:
    texts = [source for source, _ in make_pairs(24, seed=8)]
    options = DecodeOptions(beam_size=2, max_length=20)
    batches = [texts[i : i + 6] for i in range(0, 24, 6)]
    one_thread = [[t.best.text for t in capturing_engine.translate(batch, options)] for batch in batches]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda batch: capturing_engine.translate(batch, options), batches))
    assert [[t.best.text for t in batch] for batch in results] == one_thread


@pytest.mark.parametrize("attention", ["multihead", "decoder-masked"])
def test_a_warm_up_on_the_decoding_threads_leaves_nothing_to_open_or_capture(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, attention: str
) -> None:
    """``static_warm`` (the server's ``MT_STATIC_WARM``): ``warmup`` opens every bucket of sets up to that many
    sentences on the engine's decoding threads, so that sets decoding there later open no session and capture no
    graph (onnxruntime keeps the graphs per thread: warmed on another thread, they would capture again), and
    translate as an engine without static steps does; also with decoder-masked static steps, whose bindings carry
    the key layout (their fused graphs and lean step: the ones a GPU replays)."""
    if attention == "multihead":
        bundle = request.getfixturevalue("tiny_static_bundle")
        engine = _capturing(bundle, monkeypatch)
    else:
        bundle = request.getfixturevalue("tiny_static_masked_bundle")
        engine = _capturing(bundle, monkeypatch, graphs="cuda", lean_step=True)
        assert engine.static_key_layout is not None and engine.static_lean_path is not None
        assert engine.static_windows == ["window_k_0", "window_v_0", "window_k_1", "window_v_1"]  # bound to presents
    gate = static_state.GATE
    reference = Engine.load(bundle, provider="cpu")
    engine.static_warm = 8
    assert engine.decode_threads is not None
    engine.warmup()
    opened, captured = dict(OPENED), gate.captures
    assert opened["decoder"] >= len(ladder(engine, 8, 4)) and captured > 0
    pairs = make_pairs(24, seed=5)
    options = DecodeOptions(beam_size=4, max_length=40)
    for size in (1, 3, 8, 5):
        texts = [source for source, _ in random.Random(size).sample(pairs, size)]
        got = engine.decode_threads.submit(engine.translate, texts, options).result()
        assert [t.best.token_ids for t in got] == [t.best.token_ids for t in reference.translate(texts, options)]
    assert dict(OPENED) == opened and gate.captures == captured


def test_a_warm_up_stays_within_its_budget_smallest_buckets_first(capturing_engine: Engine) -> None:
    """The buffers a warm-up opens fit its budget, smallest buckets first; they wait in the pool, the largest
    released first, so that the pool's limit frees those before the small sets' (batch 1's) buffers."""
    engine, pool = capturing_engine, capturing_engine.static_pool
    buckets = ladder(engine, 16, 4)
    sizes = [buffer_bytes(engine, dims) for dims in buckets]
    assert sizes == sorted(sizes) and len({d.slots for d in buckets}) == 5
    done = warm(engine, 16, budget=sum(sizes[:7]))
    assert (done.buckets, done.skipped, done.nbytes) == (7, len(buckets) - 7, sum(sizes[:7]))
    assert pool.free_bytes == done.nbytes  # the buffers' own count: buffer_bytes is what they hold
    released = [buffers.dims for buffers in pool._released.values()]
    assert released == buckets[:7][::-1]
    assert done.bindings == 7 * 2  # k 8 (beam 4: beam + 1 and up to 3 banned), two cache parities


def test_a_warm_up_that_fails_half_way_keeps_what_it_warmed_and_the_engine_serves(
    capturing_engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bucket whose run fails during the warm-up (on a GPU: out of memory while capturing) stops the warm-up:
    the buckets warmed before it wait in the pool, the failing one is not kept, the engine logs it and still warms
    up and translates (the other buckets open on first use)."""

    engine, pool = capturing_engine, capturing_engine.static_pool
    runs = 0
    real_run = static_state._run

    def failing(*args: object, **kwargs: object) -> object:
        nonlocal runs
        runs += 1
        if runs == 3 * CAPTURE_RUNS * 2 + 1:  # the fourth bucket's first run: three buckets of 2 bindings warmed
            raise RuntimeError("CUDA out of memory (injected)")
        return real_run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(static_state, "_run", failing)
    engine.static_warm = 8
    with caplog.at_level("WARNING", logger="inference.engine"):
        engine.warmup()
    assert "opening the buckets of up to 8 sentences at load failed (RuntimeError" in caplog.text
    buckets, kept = ladder(engine, 8, 4), [b.dims for b in pool._released.values()]
    assert set(buckets[:3]) <= set(kept) and buckets[3] not in kept
    texts = [source for source, _ in make_pairs(4, seed=1)]
    assert all(t.best.text for t in engine.translate(texts, DecodeOptions(beam_size=2, max_length=20)))


def test_a_set_moving_up_takes_an_open_larger_bucket_within_twice_the_buffers(
    tiny_static_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BufferPool.fitting``: a set that needs a bucket nobody opened takes the smallest open one at least as large
    on every axis whose buffers are at most twice its own, and translates as the dynamic engine does; past twice, it
    opens its own. (No compaction here: whether the last sentence runs alone, and its set then moves down to a bucket
    of one slot, opening it, depends on the tiny model's lengths.)"""
    monkeypatch.setattr(static_state, "COMPACT_BELOW", 1 << 30)
    reference = Engine.load(tiny_static_bundle, provider="cpu")
    texts = [source for source, _ in make_pairs(3, seed=2, min_len=1, max_len=4)]
    options = DecodeOptions(beam_size=4, max_length=12)
    expected = [t.best.token_ids for t in reference.translate(texts, options)]
    need = Dims(4, 4, 16, 32)  # 3 short sentences, new: 4 slots, the narrowest source and cache widths

    for opened, larger in ((Dims(4, 4, 32, 64), True), (Dims(4, 4, 64, 64), False)):
        engine = Engine.load(tiny_static_bundle, provider="cpu", static_step=True)
        pool = engine.static_pool
        pool.release(pool.acquire(opened))
        ratio = buffer_bytes(engine, opened) / buffer_bytes(engine, need)
        assert (ratio <= REUSE_BYTES) is larger, ratio
        before = OPENED["decoder"]
        assert [t.best.token_ids for t in engine.translate(texts, options)] == expected
        assert (OPENED["decoder"] == before) is larger  # took the open bucket, or opened the one it needs
        assert pool.opened == ({opened} if larger else {opened, need})
    # two open buckets fit a set of 2: the one with the smaller buffers is taken; an open bucket is itself
    pool.release(pool.acquire(Dims(2, 4, 16, 64)))
    small = Dims(2, 4, 16, 32)
    assert buffer_bytes(engine, Dims(2, 4, 16, 64)) < buffer_bytes(engine, need) <= 2 * buffer_bytes(engine, small)
    assert pool.fitting(small) == Dims(2, 4, 16, 64) and pool.fitting(need) == need


def test_a_warm_up_with_lanes_opens_each_lanes_buckets_on_a_decoding_thread_of_its_own(
    capturing_engine: Engine, tiny_static_bundle: Path
) -> None:
    """With lanes (the server's ``MT_LANES``) each decoding thread steps on static sessions of its own: ``warmup``
    opens and captures every bucket of sets up to ``static_warm`` sentences for each lane, each on a thread of the
    engine's decoding pool, so that two running sets stepping there at once (a server's two workers) open and capture
    nothing, and translate as an engine without static steps does."""
    gate, engine = static_state.GATE, capturing_engine
    reference = Engine.load(tiny_static_bundle, provider="cpu")
    engine.lanes, engine.static_warm = 2, 8
    assert engine.decode_threads is not None
    engine.warmup()
    opened, captured = dict(OPENED), gate.captures
    sessions = engine.static_pool._sessions
    by_lane = {lane: {(dims, lean) for dims, lean, other in sessions if other == lane} for _, _, lane in sessions}
    assert set(by_lane) == {0, 1} and by_lane[0] == by_lane[1], by_lane  # the same buckets, once a lane
    assert len(by_lane[0]) >= len(ladder(engine, 8, 4))
    pairs = make_pairs(24, seed=5)
    options = DecodeOptions(beam_size=4, max_length=40)
    both = threading.Barrier(2)

    def worker(texts: list[str]) -> list[list[int]]:
        both.wait(timeout=30)  # two sets at once, as a server's two workers: on two of the pool's threads
        return [t.best.token_ids for t in engine.translate(texts, options)]

    for size in (1, 5, 8):
        texts = [[source for source, _ in random.Random(size + lane).sample(pairs, size)] for lane in (0, 1)]
        got = [f.result() for f in [engine.decode_threads.submit(worker, batch) for batch in texts]]
        assert got == [[t.best.token_ids for t in reference.translate(batch, options)] for batch in texts]
    assert dict(OPENED) == opened and gate.captures == captured


def test_lanes_split_a_batch_and_capture_each_lanes_graphs_without_waiting_on_each_other(
    capturing_engine: Engine, tiny_static_bundle: Path
) -> None:
    """``translate`` with two lanes on an engine that captures (what CUDA does): the two sets step at once, each
    capturing its own bindings' graphs exclusive while the other's work waits at the gate (no deadlock, no lost
    step); the translations are those of an engine without static steps, round after round."""
    from concurrent.futures import ThreadPoolExecutor as Pool

    gate, engine = static_state.GATE, capturing_engine
    engine.lanes, engine.lane_threads, engine.lane_sentences = 2, Pool(1, thread_name_prefix="mt-lane"), 2
    reference = Engine.load(tiny_static_bundle, provider="cpu")
    texts = [source for source, _ in make_pairs(24, seed=9)]
    options = DecodeOptions(beam_size=4, max_length=40)
    expected = [t.best.token_ids for t in reference.translate(texts, options)]
    for _ in range(2):  # the first round captures in both lanes, the second replays
        got = [t.best.token_ids for t in engine.translate(texts, options)]
        assert got == expected
    lanes = {lane for _, _, lane in engine.static_pool._sessions}
    assert lanes == {0, 1} and gate.captures > 0
    # (captures go on while a lane takes buffers last bound for the other, which depends on the threads' timing:
    # each buffers, lane, k and parity captures once)
    bound = {key for buffers in engine.static_pool._released.values() for key in buffers.bindings}
    assert {key[3] for key in bound} == {0, 1}
