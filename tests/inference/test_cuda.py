"""The CUDA path: the same bundle decodes the same on the GPU as on the CPU, and fp16 bundles export, pass
their parity check and decode on the GPU.

Skipped where onnxruntime has no usable CUDA provider (CI, and any machine without an NVIDIA GPU). Run on a
GPU machine with onnxruntime-gpu: ``pytest -m gpu`` (these), then ``pytest tests/inference tests/export``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import inference.beam_search as beam_search_module
from core.graphs import LEAN_STEP
from core.translation import DecodeOptions, Translation
from inference.engine import Engine, gpu_present
from testkit.running import graph_runs
from testkit.synthetic import make_pairs

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not ("CUDAExecutionProvider" in ort.get_available_providers() and gpu_present()),
        reason="needs onnxruntime's CUDA provider and an NVIDIA GPU",
    ),
]

TEXTS = [s for s, _ in make_pairs(24, seed=5, min_len=1, max_len=7)]
BEAM = DecodeOptions(beam_size=4, n_best=2, length_penalty=0.6, return_attention=True)


def _decode(engine: Engine, options: DecodeOptions, batch: int) -> list[Translation]:
    sources = [engine.tokenize(t) for t in TEXTS]
    out: list[Translation] = []
    for start in range(0, len(sources), batch):
        out += engine.translate_ids(sources[start : start + batch], options)
    return out


def _assert_decodes_like(expected: Engine, engine: Engine, batches: tuple[int, ...]) -> None:
    """``engine`` finds the beams ``expected`` finds at each batch size. onnxruntime's CUDA provider runs fp32
    products in TF32 on Ampere and later (its use_tf32 default): scores and attention ~1e-3 off the CPU's."""
    for batch in batches:
        _assert_same_beams(_decode(expected, BEAM, batch), _decode(engine, BEAM, batch))


def _assert_same_beams(expected: list[Translation], got: list[Translation]) -> None:
    for c, g in zip(expected, got, strict=True):
        assert [h.token_ids for h in g.hypotheses] == [h.token_ids for h in c.hypotheses]
        for hc, hg in zip(c.hypotheses, g.hypotheses, strict=True):
            assert hg.score == pytest.approx(hc.score, abs=1e-2)
            assert hc.attention is not None and hg.attention is not None
            np.testing.assert_allclose(np.asarray(hg.attention), np.asarray(hc.attention), atol=1e-2)


@pytest.fixture(scope="module")
def cpu_engine(tiny_bundle: Path) -> Engine:
    return Engine.load(tiny_bundle, provider="cpu", threads=1)


@pytest.fixture(scope="module")
def cuda_engine(tiny_bundle: Path) -> Engine:
    return Engine.load(tiny_bundle, provider="cuda")


def test_cuda_engine_runs_on_the_gpu(cuda_engine: Engine) -> None:
    assert cuda_engine.provider == "CUDAExecutionProvider"
    assert cuda_engine.device == ("cuda", 0)
    for session in cuda_engine.sessions.values():
        assert session.get_providers()[0] == "CUDAExecutionProvider"
    # decoded on threads of its own that outlive a scheduler's idle workers (each thread has its CUDA context)
    assert cuda_engine.decode_threads is not None


@pytest.mark.parametrize("batch", [1, 5, 24])
def test_cuda_beam_search_equals_cpu(cpu_engine: Engine, cuda_engine: Engine, batch: int) -> None:
    _assert_decodes_like(cpu_engine, cuda_engine, (batch,))


def test_cuda_beam_search_in_arrays_equals_the_cpu_walking(
    cpu_engine: Engine, cuda_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search form large sets take (hypotheses in arrays, inference/beam_search.py ARRAYS_FROM), forced for a
    batch of 24 on CUDA, finds the beams, scores and attention the CPU finds with its hypotheses linked."""
    expected = _decode(cpu_engine, BEAM, 24)  # 24 sentences walk (ARRAYS_FROM is 56, GUARDED_ARRAYS_FROM 40)
    monkeypatch.setattr(beam_search_module, "ARRAYS_FROM", 1)
    monkeypatch.setattr(beam_search_module, "GUARDED_ARRAYS_FROM", 1)
    _assert_same_beams(expected, _decode(cuda_engine, BEAM, 24))


def test_fp16_bundle_exports_checks_and_decodes_on_cuda(
    tiny_checkpoint: Path, cuda_engine: Engine, tmp_path: Path
) -> None:
    from training.export import export_bundle

    manifest = export_bundle(tiny_checkpoint, tmp_path / "fp16", dtype="fp16")
    parity = manifest["export"]["parity"]
    assert "skipped" not in parity, parity
    assert parity["provider"] == "CUDAExecutionProvider"
    assert parity["random"]["max_abs_diff"] < 0.1
    half = Engine.load(tmp_path / "fp16", provider="cuda")
    greedy = DecodeOptions(beam_size=1)
    full, halved = _decode(cuda_engine, greedy, 8), _decode(half, greedy, 8)
    same = sum(f.best.token_ids == h.best.token_ids for f, h in zip(full, halved, strict=True))
    # The tiny model is near-perfect on its task, so fp16 rounding should flip no argmax.
    assert same == len(TEXTS), f"{len(TEXTS) - same} of {len(TEXTS)} greedy outputs differ in fp16"


def test_a_running_set_on_cuda_admits_mid_run_like_the_cpu(cpu_engine: Engine, cuda_engine: Engine) -> None:
    """Sentences admitted between steps on the GPU: the state graphs (merge, select, trim) run on the device
    and the results are the CPU's, token for token."""
    assert _admitted_mid_run(cpu_engine) == _admitted_mid_run(cuda_engine)


def _admitted_mid_run(engine: Engine) -> list[list[list[int]]]:
    """Every text admitted into one running set, a step after every third: each one's hypotheses' tokens."""
    running, done = engine.running_set(), {}
    for i, text in enumerate(TEXTS):
        running.admit([(i, text, BEAM)])
        if i % 3 == 2:
            done.update(running.step())
    while running:
        done.update(running.step())
    return [[h.token_ids for h in done[i].hypotheses] for i in range(len(TEXTS))]


def test_a_bundle_with_gpu_graphs_loads_them_on_cuda(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from training.export import export_bundle

    export_bundle(tiny_checkpoint, tmp_path / "dual", quantize="int8-channel", tolerance=3.0, gpu_dtype="fp16")
    engine = Engine.load(tmp_path / "dual", provider="auto")
    assert (engine.provider, engine.graphs, engine.graphs_dtype) == ("CUDAExecutionProvider", "cuda", "fp16")
    assert Engine.load(tmp_path / "dual", provider="cpu").graphs_dtype == "int8-channel"
    assert all(t.best.text for t in engine.translate(TEXTS[:8], BEAM))


def test_fp16w_graphs_compute_in_fp32_on_cuda(tiny_checkpoint: Path, cuda_engine: Engine, tmp_path: Path) -> None:
    """fp16w (weights stored as fp16, widened when the session loads): on CUDA the same beams as the fp32
    graphs, since only the weights' rounding differs, and the tiny model's argmaxes do not flip on it."""
    from training.export import export_bundle

    export_bundle(tiny_checkpoint, tmp_path / "w16", quantize="int8-channel", tolerance=3.0, gpu_dtype="fp16w")
    engine = Engine.load(tmp_path / "w16", provider="auto")
    assert (engine.graphs, engine.graphs_dtype) == ("cuda", "fp16w")
    full, widened = _decode(cuda_engine, BEAM, 8), _decode(engine, BEAM, 8)
    assert [t.best.token_ids for t in widened] == [t.best.token_ids for t in full]


@pytest.mark.parametrize("cuda_graph", [True, False])
def test_static_steps_replayed_as_cuda_graphs_decode_like_the_cpu(
    tiny_static_bundle: Path, cpu_engine: Engine, cuda_graph: bool
) -> None:
    """The static-shape state on CUDA, each step captured once and replayed as a CUDA graph (and, to tell a
    capture problem from a static-state one, without capture): whole batches of several sizes twice (the second
    time the pooled buffers and their captured graphs are reused), then sentences admitted mid-run."""
    static = Engine.load(tiny_static_bundle, provider="cuda", graphs="cuda", static_step=True, cuda_graph=cuda_graph)
    assert static.cuda_graph is cuda_graph and static.static_step
    _assert_decodes_like(cpu_engine, static, (1, 5, 24, 5))
    assert _admitted_mid_run(cpu_engine) == _admitted_mid_run(static)


@pytest.mark.parametrize("static", [False, True])
def test_fused_attention_decodes_on_cuda_like_the_cpu(
    tiny_fused_bundle: Path, cpu_engine: Engine, static: bool
) -> None:
    """Graphs exported with fused attention (MultiHeadAttention and SkipLayerNormalization kernels, training/fused.py)
    on CUDA: the beams, scores and attention of the plain graphs on the CPU, for whole batches and for sentences
    admitted mid-run, launched node by node and (static) replayed as CUDA graphs."""
    fused = Engine.load(tiny_fused_bundle, provider="cuda", graphs="cuda", static_step=static)
    _assert_decodes_like(cpu_engine, fused, (1, 5, 24))
    assert _admitted_mid_run(fused) == _admitted_mid_run(cpu_engine)


def test_the_lean_step_on_cuda_finds_the_full_steps_beams(tiny_fused_bundle: Path, cpu_engine: Engine) -> None:
    """Where nobody asks for attention rows a fused GPU set steps without them (core/graphs.py ``LEAN_STEP``): on
    CUDA the beams and scores of the same engine stepping the full graph, and of the plain graphs on the CPU."""
    lean = Engine.load(tiny_fused_bundle, provider="cuda", graphs="cuda")  # on CUDA by default
    full = Engine.load(tiny_fused_bundle, provider="cuda", graphs="cuda", lean_step=False)
    assert LEAN_STEP in lean.sessions and LEAN_STEP not in full.sessions
    roles = graph_runs(lean)
    options = dataclasses.replace(BEAM, return_attention=False)
    for batch in (1, 5, 24):
        expected = _decode(cpu_engine, options, batch)
        for engine in (lean, full):
            for c, g in zip(expected, _decode(engine, options, batch), strict=True):
                assert [h.token_ids for h in g.hypotheses] == [h.token_ids for h in c.hypotheses]
                assert [h.score for h in g.hypotheses] == pytest.approx([h.score for h in c.hypotheses], abs=1e-2)
    assert LEAN_STEP in roles and "decoder" not in roles


def test_the_lean_static_step_replays_on_cuda_beside_the_full_one(tiny_fused_bundle: Path, cpu_engine: Engine) -> None:
    """Static running sets on CUDA replay the static step without attention rows (core/graphs.py ``STATIC_LEAN``)
    where nobody asks for them and the full one where somebody does, both captured over the same buffers: the CPU's
    beams either way, and in one set whose sentences ask for rows or not as they are admitted mid-run."""
    static = Engine.load(tiny_fused_bundle, provider="cuda", graphs="cuda", static_step=True, cuda_graph=True)
    assert static.static_lean_path is not None  # lean on CUDA by default
    options = dataclasses.replace(BEAM, return_attention=False)
    for batch in (1, 5, 24):
        for c, g in zip(_decode(cpu_engine, options, batch), _decode(static, options, batch), strict=True):
            assert [h.token_ids for h in g.hypotheses] == [h.token_ids for h in c.hypotheses]
    assert {lean for _, lean, _ in static.static_pool._sessions} == {True}
    _assert_decodes_like(cpu_engine, static, (1, 5))  # rows asked: the full step, over the same buffers
    assert {lean for _, lean, _ in static.static_pool._sessions} == {True, False}
    running, done = static.running_set(), {}
    for i, text in enumerate(TEXTS):  # every other sentence asks for rows: the set switches graphs step by step
        running.admit([(i, text, BEAM if i % 2 else options)])
        if i % 3 == 2:
            done.update(running.step())
    while running:
        done.update(running.step())
    expected = cpu_engine.translate(TEXTS, options)
    assert [done[i].best.token_ids for i in range(len(TEXTS))] == [t.best.token_ids for t in expected]


def test_running_sets_in_two_threads_capture_and_replay_like_one_thread(
    tiny_static_bundle: Path, cpu_engine: Engine
) -> None:
    """What the server does with --static-step (two running sets, each stepping in its own thread) on CUDA: each
    capture waits for the other thread's device work (inference/capture.py). Without that, the other thread's
    copies broke captures: the first H200 run answered 103 of a load bench's requests with 500."""
    from concurrent.futures import ThreadPoolExecutor

    static = Engine.load(tiny_static_bundle, provider="cuda", graphs="cuda", static_step=True, cuda_graph=True)
    sources = [static.tokenize(t) for t in TEXTS]
    batches = [sources[i : i + 3] for i in range(0, len(sources), 3)]
    expected = [[t.best.token_ids for t in cpu_engine.translate_ids(b, BEAM)] for b in batches]
    with ThreadPoolExecutor(2) as pool:
        for _ in range(2):  # the first round captures (in both threads), the second mostly replays
            got = list(pool.map(lambda b: [t.best.token_ids for t in static.translate_ids(b, BEAM)], batches))
            assert got == expected


def test_lanes_capture_and_replay_on_sessions_of_their_own(tiny_fused_bundle: Path, cpu_engine: Engine) -> None:
    """``lanes=2`` on CUDA: a batch decodes as two running sets on two threads, each capturing and replaying its own
    static sessions' graphs (two lanes of sessions), twice over (the second time replays): the CPU's beams."""
    lanes = Engine.load(tiny_fused_bundle, provider="cuda", graphs="cuda", static_step=True, lanes=2)
    lanes.lane_sentences = 2
    for _ in range(2):
        for batch in (5, 24):
            expected = _decode(cpu_engine, BEAM, batch)
            for c, g in zip(expected, _decode(lanes, BEAM, batch), strict=True):
                assert [h.token_ids for h in g.hypotheses] == [h.token_ids for h in c.hypotheses]
    assert {lane for _, _, lane in lanes.static_pool._sessions} == {0, 1}


def test_a_warm_up_captures_on_the_decoding_thread_and_later_sets_only_replay(
    tiny_static_bundle: Path, cpu_engine: Engine
) -> None:
    """``static_warm`` on CUDA (the server's MT_STATIC_WARM): the warm-up opens and captures the buckets of sets up
    to 8 sentences on the engine's decoding thread; sets decoded there afterwards decode like the CPU, open no
    session and capture no graph (BEAM's k is 8, the beam-4 k the warm-up captures)."""
    from inference.capture import GATE
    from inference.static_state import OPENED

    static = Engine.load(
        tiny_static_bundle, provider="cuda", graphs="cuda", static_step=True, cuda_graph=True, static_warm=8
    )
    assert static.cuda_graph and static.decode_threads is not None
    static.warmup()
    opened, captured = dict(OPENED), GATE.captures
    sources = [static.tokenize(t) for t in TEXTS]
    for size in (1, 3, 8):
        batch = sources[:size]
        got = static.decode_threads.submit(static.translate_ids, batch, BEAM).result()
        assert [t.best.token_ids for t in got] == [t.best.token_ids for t in cpu_engine.translate_ids(batch, BEAM)]
    assert dict(OPENED) == opened and GATE.captures == captured


@pytest.mark.parametrize("graphs", ["main", "cuda"])
def test_caches_that_never_move_decode_on_cuda_like_the_cpu(wide_heads_bundle: Path, graphs: str) -> None:
    """The masked step on CUDA (DecoderMaskedMultiHeadAttention, whose CUDA kernel keeps keys in a layout of its
    own, which the state's moves follow: inference/clock_state.py) finds the CPU's beams, in batches and with
    sentences admitted mid-run, on plain and fused graphs; its first sets start at the fewest columns, so that the
    clock's columns move too. On a model with 32-value heads (``wide_heads_bundle``): CUDA's kernel takes no
    other below 64 (the tiny model's are 16; the engine refuses them there)."""
    import inference.clock_state as clock_state

    cpu = Engine.load(wide_heads_bundle, provider="cpu", threads=1)
    engine = Engine.load(wide_heads_bundle, provider="cuda", graphs=graphs, masked_step=True)
    assert engine.provider == "CUDAExecutionProvider" and engine.masked_step
    columns = clock_state.COLUMNS_PER_SOURCE, clock_state.MIN_COLUMNS
    clock_state.COLUMNS_PER_SOURCE, clock_state.MIN_COLUMNS = 0, 4
    try:
        _assert_decodes_like(cpu, engine, (1, 5, 24))
        assert _admitted_mid_run(engine) == _admitted_mid_run(cpu)
    finally:
        clock_state.COLUMNS_PER_SOURCE, clock_state.MIN_COLUMNS = columns


def test_kernels_of_decoder_masked_attention_are_refused_on_cuda_for_heads_it_does_not_take(
    tiny_masked_bundle: Path, tiny_static_masked_bundle: Path
) -> None:
    """The tiny model's heads are 16 values wide: both steps built on DecoderMaskedMultiHeadAttention are refused on
    CUDA with an EngineError that says what to do, not an onnxruntime error in the first step."""
    from inference.engine import EngineError

    with pytest.raises(EngineError, match="heads of"):
        Engine.load(tiny_masked_bundle, provider="cuda", masked_step=True)
    with pytest.raises(EngineError, match="heads of"):
        Engine.load(tiny_static_masked_bundle, provider="cuda", graphs="cuda", static_step=True)


@pytest.fixture(scope="module")
def wide_heads_bundle(
    synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The tiny model with heads of 32 values (``testkit.tiny.wide_heads_checkpoint``: CUDA's
    DecoderMaskedMultiHeadAttention takes 32, 64 or 128, the tiny model's are 16), exported with the masked step
    and, in an fp32 GPU set, decoder-masked static steps."""
    from testkit.tiny import wide_heads_checkpoint
    from training.export import export_bundle

    work = tmp_path_factory.mktemp("wide-heads")
    checkpoint = wide_heads_checkpoint(*synthetic_corpus, tiny_vocab, work / "run")
    how = {"gpu_dtype": "fp32", "gpu_attention": "fused", "static_step": True, "static_attention": "decoder-masked"}
    meta = {"name": "wide-heads", "version": "1", "source_language": "en", "target_language": "de"}
    export_bundle(checkpoint, work / "bundle", **meta, **how, masked_step=True)  # type: ignore[arg-type]
    return work / "bundle"


def test_the_decoder_masked_static_step_on_cuda_computes_the_cpus_in_cudas_key_layout(
    wide_heads_bundle: Path,
) -> None:
    """The decoder-masked static step (``--static-attention decoder-masked``) on CUDA, its keys in CUDA's kernel's
    layout ((rows, heads, d_head / x, columns, x), which the engine binds as ``key_layout``), computes the CPU's step
    in the plain layout: the same top-k log-probabilities and the same caches, the new column included, once CUDA's
    keys are read back in the plain layout (TF32 products: 1e-2)."""
    from inference.static_state import Dims, StaticSession
    from tests.inference.test_masked_attention_kernel import _from_layout, static_step_feeds

    bundle = wide_heads_bundle
    cpu = Engine.load(bundle, provider="cpu", threads=1, graphs="cuda", static_step=True)
    gpu = Engine.load(bundle, provider="cuda", graphs="cuda", static_step=True, cuda_graph=False)
    assert cpu.static_key_layout is not None and cpu.static_key_layout.shape == (1, 32)
    assert gpu.static_key_layout is not None and gpu.static_key_layout.shape == (8, 4)  # fp32: 4 values in 16 bytes
    dims = Dims(slots=2, hyps=4, width=16, columns=32)
    outputs = []
    for engine in (cpu, gpu):
        assert engine.static_key_layout is not None
        session = StaticSession(engine, dims).session
        feeds, _, _ = static_step_feeds(engine, dims, engine.static_key_layout.shape)
        outputs.append(dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True)))
    want, got = outputs
    top = "topk" if "topk" in want else "topk_logprobs"
    np.testing.assert_allclose(got[top][..., 0, :] if top == "topk" else got[top],
                               want[top][..., 0, :] if top == "topk" else want[top], atol=1e-2)  # fmt: skip
    for name in gpu.present_names:
        cache = _from_layout(got[name], 8, 4) if name.startswith("present_k_") else got[name]
        np.testing.assert_allclose(cache, want[name], atol=1e-2)


def test_decoder_masked_static_steps_replayed_on_cuda_decode_like_the_cpu(wide_heads_bundle: Path) -> None:
    """The decoder-masked static steps on CUDA, replayed as CUDA graphs, keys in CUDA's layout (their window's gather
    and ``grow`` follow it), find the CPU's beams: whole batches of several sizes twice, then sentences admitted
    mid-run (``grow`` moves the keys as sets widen)."""
    cpu = Engine.load(wide_heads_bundle, provider="cpu", threads=1)
    static = Engine.load(wide_heads_bundle, provider="cuda", graphs="cuda", static_step=True)
    assert static.cuda_graph and static.static_key_layout is not None and static.static_key_layout.shape == (8, 4)
    _assert_decodes_like(cpu, static, (1, 5, 24, 5))
    assert _admitted_mid_run(cpu) == _admitted_mid_run(static)
