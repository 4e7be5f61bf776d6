"""Fused against plain attention (export --attention): nodes per graph, graph call times and decoding speed.

    python -m bench attention --checkpoint CKPT [--provider cpu|cuda] [--dtype fp32|fp16w|int8-channel]
                              [--input SENTENCES] [--sentences 256] [--batch-sizes 1,8,32] [--beam 4]
                              [--threads 2] [--repeats 5] [--out docs/reports/attention/report]

The checkpoint is exported twice, the same way but for ``--attention plain`` / ``fused`` (training/fused.py):
fp32 graphs, int8-channel ones, or the fp16w GPU set (--gpu-dtype fp16w, measured through its ``cuda`` graphs).
Three things are measured, each alternating the two exports ``--repeats`` times, medians:

- the nodes onnxruntime runs per graph after its own optimizations on the provider (a GPU pays a kernel launch
  and host work per node, docs/inference-core.md);
- one encoder call (sentences of 28 pieces, some padded) and one decoder step (``--beam`` hypotheses a sentence,
  20 cached positions, 25 source positions) on random inputs, per batch size;
- the engine decoding the input's sentences (one a line, the source column of a TSV, or ``stdlib-docs``:
  sentences of Python's own documentation, read at run time) at each batch size with
  beam ``--beam``: sentences/s, and how many best outputs the two share.

Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import collections
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from bench.loadtools import ROOT, STDLIB_DOCS, command_line, machine, read_sources, report_dir, write_report
from core.bundle import read_manifest
from core.translation import DecodeOptions
from inference.engine import Engine, choose_providers
from inference.threads import session_options
from training.export.feeds import random_step_inputs, typed

KINDS = ("plain", "fused")
DTYPES = {
    "fp32": {},
    "int8-channel": {"quantize": "int8-channel", "tolerance": 3.0},
    "fp16w": {"gpu_dtype": "fp16w"},
}


def export(checkpoint: str, dtype: str, kind: str, out: Path) -> tuple[Path, str]:
    """The bundle and the graph set (``main`` or ``cuda``) to measure."""
    from training.export import export_bundle  # torch: only the export needs it

    how: dict[str, Any] = dict(DTYPES[dtype])
    if "gpu_dtype" in how:
        how["gpu_attention"] = kind
    else:
        how["attention"] = kind
    export_bundle(checkpoint, out, **how)
    return out, "cuda" if "gpu_dtype" in how else "main"


def graph_path(bundle: Path, graphs: str, role: str) -> Path:
    return bundle / ("" if graphs == "main" else graphs) / f"{role}.onnx"


def session(path: Path, providers: list[str], threads: int, optimized: Path | None = None) -> ort.InferenceSession:
    options = session_options(threads)
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED  # portable, no layouts
    return ort.InferenceSession(str(path), options, providers=providers)


def node_counts(path: Path, providers: list[str], work: Path) -> dict[str, Any]:
    optimized = work / f"optimized-{path.parent.name}-{path.name}"
    session(path, providers, 1, optimized)
    ops = collections.Counter(n.op_type for n in onnx.load(str(optimized), load_external_data=False).graph.node)
    return {"nodes": sum(ops.values()), "ops": dict(ops.most_common())}


def encoder_inputs(manifest: dict[str, Any], batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    arch, eos, pad = manifest["architecture"], manifest["special_ids"]["eos"], manifest["special_ids"]["pad"]
    ids = rng.integers(4, arch["vocab_size"], (batch, 28))
    for row in range(batch):
        length = 28 - row % 10
        ids[row, length - 1], ids[row, length:] = eos, pad
    return {"src_ids": ids}


def time_calls(
    sessions: dict[str, ort.InferenceSession], feeds: dict[str, np.ndarray], calls: int, repeats: int
) -> dict[str, float]:
    """Median milliseconds a call per kind, the kinds alternated ``repeats`` times."""
    times: dict[str, list[float]] = {kind: [] for kind in sessions}
    typed_feeds = {kind: typed(feeds, sess) for kind, sess in sessions.items()}
    for _ in range(repeats):
        for kind, sess in sessions.items():
            sess.run(None, typed_feeds[kind])
            started = time.perf_counter()
            for _ in range(calls):
                sess.run(None, typed_feeds[kind])
            times[kind].append((time.perf_counter() - started) / calls * 1e3)
    return {kind: statistics.median(t) for kind, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench attention", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, help="a training checkpoint (or import-bundle's output)")
    parser.add_argument("--provider", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", default="fp32", choices=tuple(DTYPES))
    parser.add_argument(
        "--input",
        default=str(ROOT / "data" / "en-de" / "test.tsv"),
        help=f"sentences, one a line or a TSV's first column; {STDLIB_DOCS}: Python's own documentation",
    )
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads (CPU)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(report_dir("attention") / "report"))
    args = parser.parse_args(argv)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    providers = choose_providers(args.provider)
    texts = read_sources(args.input, args.sentences)
    rng = np.random.default_rng(0)

    work = Path(tempfile.mkdtemp(prefix="bench-attention-"))
    exports = {}
    for kind in KINDS:
        print(f"exporting {kind} ...", flush=True)
        exports[kind] = export(args.checkpoint, args.dtype, kind, work / kind)
    manifest = read_manifest(exports["plain"][0])

    nodes = {
        role: {kind: node_counts(graph_path(b, g, role), providers, work) for kind, (b, g) in exports.items()}
        for role in ("encoder", "decoder")
    }
    calls: dict[str, dict[int, dict[str, float]]] = {"encoder": {}, "decoder": {}}
    for role in calls:
        sessions = {kind: session(graph_path(b, g, role), providers, args.threads) for kind, (b, g) in exports.items()}
        for batch in batch_sizes:
            feeds = (
                encoder_inputs(manifest, batch, rng)
                if role == "encoder"
                else random_step_inputs(manifest, batch, args.beam, rng)
            )
            print(f"{role} batch {batch} ...", flush=True)
            calls[role][batch] = time_calls(sessions, feeds, max(5, 200 // batch), args.repeats)

    engines = {
        kind: Engine.load(b, provider=args.provider, threads=args.threads, graphs=g) for kind, (b, g) in exports.items()
    }
    options = DecodeOptions(beam_size=args.beam)
    sources = [engines["plain"].tokenize(t) for t in texts]
    decoding: dict[int, dict[str, Any]] = {}
    for batch in batch_sizes:
        seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
        outputs: dict[str, list[list[int]]] = {}
        for _ in range(max(1, args.repeats // 2)):
            for kind, engine in engines.items():
                engine.translate_ids(sources[:batch], options)  # warm-up at this batch size
                started, got = time.perf_counter(), []
                for start in range(0, len(sources), batch):
                    got += [t.best.token_ids for t in engine.translate_ids(sources[start : start + batch], options)]
                seconds[kind].append(time.perf_counter() - started)
                outputs[kind] = got
        same = sum(a == b for a, b in zip(outputs["plain"], outputs["fused"], strict=True))
        decoding[batch] = {
            **{kind: len(sources) / statistics.median(s) for kind, s in seconds.items()},
            "identical": same / len(sources),
        }
        print(f"decoding batch {batch}: {decoding[batch]}", flush=True)

    provider = engines["plain"].provider
    lines = [
        "# Fused against plain attention",
        "",
        f"Generated by `{command_line('attention', argv)}` on {time.strftime('%Y-%m-%d')}: "
        f"{manifest['name']} {manifest['version']} ({args.dtype} graphs, {args.checkpoint}), {provider}, "
        f"{args.threads} threads, beam {args.beam}, {len(texts)} sentences of {args.input}, "
        f"{platform.processor() or platform.machine()}, {args.repeats} alternated repeats (medians).",
        "",
        "| graph | plain nodes | fused nodes | fused / plain |",
        "|---|---:|---:|---:|",
    ]
    for role, counts in nodes.items():
        p, f = counts["plain"]["nodes"], counts["fused"]["nodes"]
        lines.append(f"| {role} | {p} | {f} | {f / p:.2f} |")
    lines += ["", "| call | batch | plain ms | fused ms | plain / fused (speed-up) |", "|---|---:|---:|---:|---:|"]
    for role, by_batch in calls.items():
        for batch, ms in by_batch.items():
            lines.append(
                f"| {role} | {batch} | {ms['plain']:.3f} | {ms['fused']:.3f} | {ms['plain'] / ms['fused']:.2f}x |"
            )
    lines += [
        "",
        "| decoding, batch | plain sent/s | fused sent/s | fused / plain | identical best outputs |",
        "|---:|---:|---:|---:|---:|",
    ]
    for batch, row in decoding.items():
        lines.append(
            f"| {batch} | {row['plain']:.1f} | {row['fused']:.1f} | {row['fused'] / row['plain']:.2f}x "
            f"| {row['identical']:.1%} |"
        )
    markdown = "\n".join(lines) + "\n"
    print("\n" + markdown)
    report = {
        "setup": {**vars(args), "provider": provider, "machine": machine(), "date": time.strftime("%Y-%m-%d")},
        "nodes": nodes,
        "calls_ms": calls,
        "decoding": decoding,
    }
    write_report(Path(args.out), markdown, report)
    print(f"wrote {args.out}.md and .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
