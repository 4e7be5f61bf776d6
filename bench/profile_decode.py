"""Where decoding time goes: tokenization vs onnxruntime sessions vs Python beam bookkeeping, and per ONNX op.

    python -m bench profile-decode [--bundle models/en-de] [--input data/en-de/test.tsv] [--sentences 64]
                                   [--batch 32] [--beam 4] [--max-length 256] [--threads 2] [--repeats 3]
                                   [--out docs/reports/profile-decode/report]

Three passes over the same sentences, one engine: (1) timed phases: tokenization, the whole search, and
inside it the time spent in ``run_with_iobinding`` of each graph (wrapped, so the rest of the search is
Python bookkeeping: building inputs, ranking candidates, growing hypotheses); (2) onnxruntime's own
profiler, summed per op type for the decoder step graph; (3) cProfile's top functions by own time; (4) the
beam search's output-preserving early stop off and on, alternated ``--repeats`` times (median seconds, and
whether every best hypothesis is the same); (5) the GEMM kernels themselves: onnxruntime's (MLAS) against
numpy's BLAS on the shapes of the decoder step's products (MatMul + bias, same threads, alternated), which
says how much of the remaining time is the kernels rather than the graph. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import dataclasses
import functools
import io
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort

from bench.loadtools import ROOT, report_dir, write_report
from core.translation import DecodeOptions
from inference.beam_search import SearchOptions
from inference.engine import Engine
from inference.threads import session_options


class TimedSession:
    """Wraps a session (the engine's pybind ones): counts the seconds spent in run_with_iobinding."""

    def __init__(self, session: Any):
        self.session = session
        self.seconds = 0.0
        self.calls = 0

    def run_with_iobinding(self, binding: Any, *args: Any) -> None:
        started = time.perf_counter()
        self.session.run_with_iobinding(binding, *args)
        self.seconds += time.perf_counter() - started
        self.calls += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def decode_all(engine: Engine, ids: list[list[int]], batch: int, options: DecodeOptions) -> int:
    tokens = 0
    for lo in range(0, len(ids), batch):
        tokens += sum(len(t.best.token_ids) for t in engine.translate_ids(ids[lo : lo + batch], options))
    return tokens


def numpy_blas() -> str:
    import numpy as np

    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[func-returns-value]
        return f"{info.get('name', '?')} {info.get('version', '')}".strip()
    except Exception:  # older numpy: no dict mode
        return "BLAS"


def gemm_shapes(arch: dict[str, Any], rows: int) -> list[tuple[str, int, int, int]]:
    """(name, M, K, N) of the decoder step's products at ``rows`` hypotheses."""
    d, ff, vocab = arch["d_model"], arch["d_ff"], arch["vocab_size"]
    return [
        ("output projection", rows, d, vocab),
        ("self-attention q/k/v", rows, d, 3 * d),
        ("feed-forward in", rows, d, ff),
        ("feed-forward out", rows, ff, d),
    ]


def gemm_compare(m: int, k: int, n: int, threads: int, repeats: int) -> tuple[float, float]:
    """Median seconds of x @ W + b in onnxruntime and in numpy, alternated."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = session_options(threads)
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    times: dict[str, list[float]] = {"ort": [], "numpy": []}
    calls = 20
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            session.run(None, {"x": x})
        times["ort"].append((time.perf_counter() - started) / calls)
        started = time.perf_counter()
        for _ in range(calls):
            x @ weight + bias
        times["numpy"].append((time.perf_counter() - started) / calls)
    return statistics.median(times["ort"]), statistics.median(times["numpy"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "en-de"))
    parser.add_argument("--input", default=str(ROOT / "data" / "en-de" / "test.tsv"))
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=256, help="length cap in pieces, EOS included")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--provider", default="cpu", help="cpu or cuda (on CUDA the GEMM comparison is skipped)")
    parser.add_argument("--repeats", type=int, default=3, help="alternated runs of the early-stop A/B")
    parser.add_argument(
        "--static-step",
        action="store_true",
        help="fixed-shape state (the bundle needs --static-step); on CUDA each step replayed as a CUDA graph, "
        "timed as 'onnxruntime static_decoder'",
    )
    parser.add_argument("--out", default=str(report_dir("profile-decode") / "report"))
    args = parser.parse_args(argv)

    lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    texts = [line.split("\t")[0] for line in lines if line.strip()][: args.sentences]
    options = DecodeOptions(beam_size=args.beam, max_length=args.max_length)

    # 1. phases
    load: dict[str, Any] = {"static_step": True} if args.static_step else {}
    steps = TimedSession(None)
    if args.static_step:  # every bucket's static step, whenever its session opens (inference/static_state.py)
        from inference import static_state

        opened = static_state.StaticSession.__init__

        def timed_steps(self: Any, *a: Any) -> None:
            opened(self, *a)
            run = self.run

            def step(binding: Any, *rest: Any) -> None:
                started = time.perf_counter()
                run(binding, *rest)
                steps.seconds += time.perf_counter() - started
                steps.calls += 1

            self.run = step

        static_state.StaticSession.__init__ = timed_steps  # type: ignore[assignment,method-assign]
    engine = Engine.load(args.bundle, provider=args.provider, threads=args.threads, **load)
    engine.warmup()
    started = time.perf_counter()
    ids = [engine.tokenize(t) for t in texts]
    tokenize_s = time.perf_counter() - started
    timed = {role: TimedSession(s) for role, s in engine.raw_sessions.items()}
    engine.raw_sessions = timed  # type: ignore[assignment]
    if args.static_step:
        steps.seconds, steps.calls = 0.0, 0  # the warm-up's steps out
        timed["static_decoder"] = steps
    started = time.perf_counter()
    generated = decode_all(engine, ids, args.batch, options)
    search_s = time.perf_counter() - started
    ort_s = sum(t.seconds for t in timed.values())
    phases = {
        "tokenize": tokenize_s,
        **{f"onnxruntime {role}": t.seconds for role, t in timed.items()},
        "python beam search and bookkeeping": search_s - ort_s,
    }
    total = tokenize_s + search_s
    calls = {role: t.calls for role, t in timed.items()}

    # 2. onnxruntime's profiler on the decoder step
    with tempfile.TemporaryDirectory() as tmp:
        original = ort.SessionOptions

        def profiling_options() -> ort.SessionOptions:
            o = original()
            o.enable_profiling = True
            o.profile_file_prefix = str(Path(tmp) / "ort")
            return o

        ort.SessionOptions = profiling_options  # type: ignore[misc]
        try:
            profiled = Engine.load(args.bundle, provider=args.provider, threads=args.threads, **load)
        finally:
            ort.SessionOptions = original  # type: ignore[misc]
        decode_all(profiled, ids, args.batch, options)
        trace = json.loads(Path(profiled.sessions["decoder"].end_profiling()).read_text())
    per_op: collections.Counter[str] = collections.Counter()
    for event in trace:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            per_op[event["args"]["op_name"]] += event["dur"]
    op_total = sum(per_op.values())

    # 3. cProfile
    profiler = cProfile.Profile()
    profiler.enable()
    decode_all(engine, ids, args.batch, options)
    profiler.disable()
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats("tottime").print_stats(8)

    # 4. early stop off / on, alternated
    seconds: dict[bool, list[float]] = {False: [], True: []}
    best: dict[bool, list[list[int]]] = {}
    plain = engine.search_options

    def with_early_stop(early: bool, options: DecodeOptions, source_len: int) -> SearchOptions:
        return dataclasses.replace(plain(options, source_len), early_stop=early)

    for _ in range(args.repeats):
        for early in (False, True):
            engine.search_options = functools.partial(with_early_stop, early)  # type: ignore[method-assign]
            started = time.perf_counter()
            best[early] = [
                t.best.token_ids
                for lo in range(0, len(ids), args.batch)
                for t in engine.translate_ids(ids[lo : lo + args.batch], options)
            ]
            seconds[early].append(time.perf_counter() - started)
    engine.search_options = plain  # type: ignore[method-assign]
    early_off, early_on = statistics.median(seconds[False]), statistics.median(seconds[True])
    same = sum(a == b for a, b in zip(best[False], best[True], strict=True))

    arch = engine.manifest["architecture"]
    # 5. GEMM kernels (numpy's BLAS threads follow OPENBLAS_NUM_THREADS / OMP_NUM_THREADS; set them to --threads)
    gemms: list[dict[str, Any]] = []
    for name, m, k, n in gemm_shapes(arch, args.batch * args.beam) if args.provider == "cpu" else []:
        ort_s, numpy_s = gemm_compare(m, k, n, args.threads, max(3, args.repeats))
        gemms.append({"name": name, "m": m, "k": k, "n": n, "ort_s": ort_s, "numpy_s": numpy_s})
    setup = (
        f"{engine.manifest['name']} {engine.manifest['version']} ({engine.manifest['export']['dtype']}, quantize "
        f"{engine.manifest['export']['quantize']}), d{arch['d_model']} {arch['encoder_layers']}+"
        f"{arch['decoder_layers']} layers, vocab {arch['vocab_size']}; {len(ids)} sentences of {args.input}, "
        f"batch {args.batch}, beam {args.beam}, length cap {args.max_length}, {args.threads} threads, "
        f"onnxruntime {ort.__version__}"
    )
    md = [
        "# Where decoding time goes",
        "",
        f"Generated by `python -m bench profile-decode` on {time.strftime('%Y-%m-%d')}: {setup}.",
        f"{generated} target pieces generated (EOS included) in {total:.2f} s: {generated / total:.0f} tokens/s; "
        f"graph calls: {', '.join(f'{r} {c}' for r, c in calls.items())}.",
        "",
        "| phase | seconds | share |",
        "|---|---:|---:|",
        *[f"| {name} | {s:.3f} | {100 * s / total:.1f} % |" for name, s in phases.items()],
        "",
        "Decoder step graph, onnxruntime's profiler, kernel time by op type (top 12):",
        "",
        "| op | ms | share |",
        "|---|---:|---:|",
        *[f"| {op} | {d / 1000:.0f} | {100 * d / op_total:.1f} % |" for op, d in per_op.most_common(12)],
        "",
        f"Early stop (inference/beam_search.py), off vs on, median of {args.repeats} alternated runs: "
        f"{early_off:.2f} s vs {early_on:.2f} s, {early_off / early_on:.2f}x; best hypothesis identical for "
        f"{same}/{len(ids)} sentences.",
        "",
        "GEMM kernels at the decoder step's shapes (x @ W + b, fp32, "
        f"{args.threads} threads, median of alternated runs): onnxruntime {ort.__version__} vs numpy's BLAS "
        f"({numpy_blas()}):",
        "",
        "| product | M x K x N | onnxruntime ms | GFLOP/s | numpy ms | GFLOP/s | onnxruntime / numpy time |",
        "|---|---|---:|---:|---:|---:|---:|",
        *[
            f"| {g['name']} | {g['m']} x {g['k']} x {g['n']} | {1000 * g['ort_s']:.2f} "
            f"| {2 * g['m'] * g['k'] * g['n'] / g['ort_s'] / 1e9:.0f} | {1000 * g['numpy_s']:.2f} "
            f"| {2 * g['m'] * g['k'] * g['n'] / g['numpy_s'] / 1e9:.0f} | {g['ort_s'] / g['numpy_s']:.2f} |"
            for g in gemms
        ],
        "",
        "cProfile, top functions by own time:",
        "",
        "```",
        *[line.rstrip() for line in buffer.getvalue().strip().splitlines()[-12:]],
        "```",
        "",
    ]
    text = "\n".join(md)
    print(text)
    out = Path(args.out)
    write_report(
        out,
        text,
        {
            "setup": setup,
            "phases_s": phases,
            "graph_calls": calls,
            "decoder_ops_us": dict(per_op),
            "early_stop_s": {"off": seconds[False], "on": seconds[True], "identical": same},
            "gemm": gemms,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
