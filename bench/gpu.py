"""Decoding on an NVIDIA GPU: one checkpoint exported fp32 and fp16, on onnxruntime's CUDA provider, beside
the same machine's CPU, in one run; and fp16w (fp32 graphs with weights stored as fp16, export --gpu-dtype fp16w).

    python -m bench gpu --checkpoint CKPT [--bundle models/en-de] [--input data/en-de/test.tsv]
    python -m bench gpu --random base --vocab VOCAB_DIR [...]
                        [--sentences 256] [--batch-sizes 1,8,32,128] [--beams 1,4] [--repeats 3]
                        [--max-length 128] [--cpu-threads 0] [--out docs/reports/gpu/report]

Needs onnxruntime-gpu with a usable CUDA provider (CUDA 13 and cuDNN 9 libraries) and torch for the export.
The systems are run alternately (cuda-fp32, cuda-fp16, cuda-fp16w, the static ones, cpu-fp32, then again)
``--repeats`` times per
configuration; the figures are medians: target tokens/s (generated pieces, EOS not counted) and sentences/s,
their ratio to cpu-fp32 on the same machine, and the share of best outputs identical to cuda-fp32's (what
fp16, and the CPU's exact fp32 against the GPU's TF32, change). With ``--bundle`` (a bundle exported with
``--gpu-dtype``, like the shipped one) two more systems run: bundle-cuda, what a server on a GPU loads from
it by default (its cuda/ graphs), and bundle-main-on-cuda, its main (CPU) graphs forced onto the GPU.
cuda-fp16w-static is the fp16w graphs with static-shape state, every decoder step replayed as a CUDA graph
(inference/static_state.py; its first pass per configuration, which captures the graphs, is not timed);
cuda-fp16w-static-nograph the same without capture. cuda-fp16w-fused and cuda-fp16w-fused-static are the
fp16w graphs exported with ``--gpu-attention fused`` (each attention one MultiHeadAttention kernel, residual
additions fused with their layer norms: training/fused.py), launched node by node and replayed.
cuda-fp16w-fused steps without attention rows where nobody asks for them (the set's lean step, core/graphs.py
``LEAN_STEP``); cuda-fp16w-fused-full is the same graphs loaded with ``lean_step=False``, every step the full one;
cuda-fp16w-fused-masked the same set stepping with its caches in place (``--masked-step``, inference/clock_state.py).
With ``--random PRESET`` the model is that training preset with random weights (seeded) and the
vocabulary of ``--vocab`` (of the preset's size): a speed figure for an architecture nobody has trained yet.
Its outputs mean nothing and their lengths are what the random weights make of them (often the length cap);
tokens/s counts what was generated. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort

from bench.loadtools import ROOT, command_line, read_sources, report_dir, report_path, write_report
from core.translation import DecodeOptions
from inference.engine import Engine, EngineError

SYSTEMS = [
    "cuda-fp32",
    "cuda-fp16",
    "cuda-fp16w",
    "cuda-fp16w-fused",
    "cuda-fp16w-fused-full",
    "cuda-fp16w-fused-masked",
    "cuda-fp16w-static",
    "cuda-fp16w-fused-static",
    "cuda-fp16w-static-nograph",
    "cuda-fp16-static",
    "cuda-fp16-fused-static",
    "cuda-fp16-fused-static-full",
    "cuda-fp16-fused-static-lanes2",
    "cuda-fp16-fused-static-dmmha",
    "cuda-fp32-static",
    "cpu-fp32",
]
STATIC = {
    "cuda-fp16w-static": ("fp16w", True),
    "cuda-fp16w-fused-static": ("fp16w-fused", True),
    "cuda-fp16w-static-nograph": ("fp16w", False),
    "cuda-fp16-static": ("fp16s", True),
    "cuda-fp16-fused-static": ("fp16s-fused", True),
    "cuda-fp16-fused-static-full": ("fp16s-fused", True),
    "cuda-fp16-fused-static-lanes2": ("fp16s-fused", True),
    "cuda-fp16-fused-static-dmmha": ("fp16s-dmmha", True),
    "cuda-fp32-static": ("fp32s", True),
}
"""The static-shape state (Engine.load static_step) on a graph set: each step replayed as a CUDA graph, or
(nograph) the same fixed shapes launched kernel by kernel, to tell the two effects apart; fp16-static asks
whether fp16 arithmetic pays once the launches are gone (fp16s: the fp16 GPU set with the static graphs), against
fp32-static (fp32s: an fp32 GPU set with the static graphs): the issue's fp16 / fp32 ratio with replay on both;
fp16-fused-static the fp16 static step with fused attention, the fewest kernels a replay can hold; it replays the
lean static step where nobody asks for attention rows (core/graphs.py ``STATIC_LEAN``, session 44), and
fp16-fused-static-full the same graphs loaded with ``lean_step=False``, every step the full one;
fp16-fused-static-lanes2 the same graphs loaded with ``lanes=2``: a batch of 32 sentences or more decodes as two
running sets, each on a thread and static sessions of its own, so that one set's replay runs while the host searches
the other's (session 45; at batch 1 it is fp16-fused-static); fp16-fused-static-dmmha its static step with each
self-attention one ``DecoderMaskedMultiHeadAttention`` over keys kept in CUDA's layout (``--static-attention
decoder-masked``, session 46), where ``MultiHeadAttention`` with a past is several kernels."""


def decode(engine: Engine, sources: list[list[int]], options: DecodeOptions, batch: int) -> tuple[float, list]:
    outputs: list[list[int]] = []
    started = time.perf_counter()
    for start in range(0, len(sources), batch):
        outputs += [t.best.token_ids for t in engine.translate_ids(sources[start : start + batch], options)]
    return time.perf_counter() - started, outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="a training checkpoint (python -m training train)")
    parser.add_argument("--random", metavar="PRESET", help="instead of --checkpoint: random weights of a preset")
    parser.add_argument("--vocab", help="with --random: a vocabulary directory of the preset's size")
    parser.add_argument("--bundle", help="also measure this bundle's GPU graphs and its main graphs on CUDA")
    parser.add_argument("--input", default=str(ROOT / "data" / "en-de" / "test.tsv"))
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch-sizes", default="1,8,32,128")
    parser.add_argument("--beams", default="1,4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=128, help="length cap in pieces, EOS included")
    parser.add_argument("--cpu-threads", type=int, default=0, help="CPU engine threads (0: onnxruntime's default)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="which systems to run (cuda-fp32 always runs)")
    parser.add_argument("--out", default=str(report_dir("gpu") / "report"))
    args = parser.parse_args(argv)
    if bool(args.checkpoint) == bool(args.random) or (args.random and not args.vocab):
        parser.error("give --checkpoint, or --random PRESET with --vocab")

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise SystemExit(f"onnxruntime {ort.__version__} has no CUDA provider: install onnxruntime-gpu")
    from training.export import export_bundle  # torch: only the export needs it

    work = Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    if args.random:
        args.checkpoint = str(random_checkpoint(args.random, Path(args.vocab), work / "random.pt"))
    systems = [s for s in SYSTEMS if s == "cuda-fp32" or s in args.systems.split(",")]
    engines: dict[str, Engine] = {}
    # the graphs each system needs: fp32 and fp16 as main graphs, fp16w as the cuda/ variant
    static = [s for s in systems if s in STATIC]
    exports: dict[str, dict[str, Any]] = {
        "fp32": {"dtype": "fp32"},
        "fp16": {"dtype": "fp16"},
        "fp16w": {
            "gpu_dtype": "fp16w",
            "gpu_attention": "plain",
            "static_step": any(STATIC[s][0] == "fp16w" for s in static),
        },
        "fp16s": {"gpu_dtype": "fp16", "gpu_attention": "plain", "static_step": True},
        "fp32s": {"gpu_dtype": "fp32", "gpu_attention": "plain", "static_step": True},
        "fp16s-fused": {"gpu_dtype": "fp16", "gpu_attention": "fused", "static_step": True},
        "fp16s-dmmha": {
            "gpu_dtype": "fp16",
            "gpu_attention": "fused",
            "static_step": True,
            "static_attention": "decoder-masked",
        },
        "fp16w-fused": {
            "gpu_dtype": "fp16w",
            "gpu_attention": "fused",
            "static_step": any(STATIC[s][0] == "fp16w-fused" for s in static),
            "masked_step": "cuda-fp16w-fused-masked" in systems,
        },
    }
    plain = ("cuda-fp16", "cuda-fp16w", "cuda-fp16w-fused")
    needed = {"fp32", *(s.removeprefix("cuda-") for s in systems if s in plain)}
    needed |= {"fp16w-fused"} if {"cuda-fp16w-fused-full", "cuda-fp16w-fused-masked"} & set(systems) else set()
    needed |= {STATIC[s][0] for s in static}
    for name, how in exports.items():
        if name in needed:
            print(f"exporting {name} ...", flush=True)
            export_bundle(args.checkpoint, work / name, **how)
    try:
        for name in sorted(needed):
            if f"cuda-{name}" in systems:
                engines[f"cuda-{name}"] = Engine.load(work / name, provider="cuda")
        if "cuda-fp16w-fused-full" in systems:
            engines["cuda-fp16w-fused-full"] = Engine.load(work / "fp16w-fused", provider="cuda", lean_step=False)
        if "cuda-fp16w-fused-masked" in systems:
            engines["cuda-fp16w-fused-masked"] = Engine.load(work / "fp16w-fused", provider="cuda", masked_step=True)
        for system in static:
            graphs, replay = STATIC[system]
            lean = False if system.endswith("-full") else None  # None: the engine's default, lean on CUDA
            lanes = 2 if system.endswith("-lanes2") else 1
            engines[system] = Engine.load(
                work / graphs, provider="cuda", static_step=True, cuda_graph=replay, lean_step=lean, lanes=lanes
            )
    except EngineError as err:
        raise SystemExit(f"CUDA provider unusable: {err}") from err
    if "cpu-fp32" in systems:
        engines["cpu-fp32"] = Engine.load(work / "fp32", provider="cpu", threads=args.cpu_threads)
    if args.bundle:
        engines["bundle-cuda"] = Engine.load(args.bundle, provider="cuda")
        engines["bundle-main-on-cuda"] = Engine.load(args.bundle, provider="cuda", graphs="main")
        systems += ["bundle-cuda", "bundle-main-on-cuda"]

    texts = read_sources(args.input, args.sentences)
    sources = [engines["cuda-fp32"].tokenize(t) for t in texts]
    failed: dict[str, str] = {}

    def attempt(system: str, run: Any) -> None:
        """``run()``; a system other than the reference that fails (onnxruntime refusing a graph capture, say)
        is reported and left out, so one system's failure does not cost the others' figures."""
        try:
            run()
        except Exception as err:  # onnxruntime's own exception types
            if system == "cuda-fp32":
                raise
            failed[system] = f"{type(err).__name__}: {err}"[:600]
            print(f"{system} left out: {failed[system]}", flush=True)
            engines.pop(system, None)
            for group in (systems, static):
                if system in group:
                    group.remove(system)

    for system, engine in list(engines.items()):  # first-call allocations and cuDNN/cuBLAS set-up out of the timings
        warm = DecodeOptions(beam_size=4, max_length=args.max_length)
        attempt(system, lambda engine=engine, warm=warm: decode(engine, sources[:8], warm, 8))

    rows: list[dict[str, Any]] = []
    for beam in [int(b) for b in args.beams.split(",")]:
        for batch in [int(b) for b in args.batch_sizes.split(",")]:
            options = DecodeOptions(beam_size=beam, max_length=args.max_length)
            outputs: dict[str, list] = {}
            # One untimed pass of every system at this size first: the static systems' buckets opened and their
            # graphs captured, and the dynamic ones' first calls at new shapes (kernel choices, arena growth; on the
            # H200 a dynamic batch of 128 took 0.41 s cold against 0.105 s warm), so each median is a warm one.
            for system in list(systems):
                attempt(system, lambda s=system, o=options, b=batch: decode(engines[s], sources, o, b))
            seconds: dict[str, list[float]] = {s: [] for s in systems}
            for _ in range(args.repeats):
                for system in systems:
                    elapsed, outputs[system] = decode(engines[system], sources, options, batch)
                    seconds[system].append(elapsed)
            tokens = {s: sum(len(o) for o in outputs[s]) for s in systems}
            for system in systems:
                median = statistics.median(seconds[system])
                same = sum(a == b for a, b in zip(outputs[system], outputs["cuda-fp32"], strict=True))
                rows.append(
                    {
                        "beam": beam,
                        "batch": batch,
                        "system": system,
                        "seconds": [round(s, 4) for s in seconds[system]],
                        "tokens_per_s": tokens[system] / median,
                        "sentences_per_s": len(sources) / median,
                        "identical_to_cuda_fp32": same / len(sources),
                    }
                )
            cpu = next((r for r in rows[-len(systems) :] if r["system"] == "cpu-fp32"), None)
            for row in rows[-len(systems) :]:
                row["vs_cpu"] = row["tokens_per_s"] / cpu["tokens_per_s"] if cpu else None
                print(
                    f"beam {beam} batch {batch:>4} {row['system']:>9}: {row['tokens_per_s']:8.0f} tok/s "
                    f"{row['sentences_per_s']:7.1f} sent/s  {_ratio(row['vs_cpu'])} vs cpu  "
                    f"identical {row['identical_to_cuda_fp32']:.0%}",
                    flush=True,
                )

    meta = {
        "command": command_line("gpu", argv),
        "onnxruntime": ort.__version__,
        "python": platform.python_version(),
        "gpu": _gpu_name(),
        "cpus": __import__("os").cpu_count(),
        "sentences": len(sources),
        "max_length": args.max_length,
        "model": f"random weights, preset {args.random}" if args.random else args.checkpoint,
        "repeats": args.repeats,
        "failed": failed,
    }
    out = Path(args.out)
    lines = [
        f"# Decoding on the GPU ({meta['gpu']})",
        "",
        f"`{meta['command']}`: model {meta['model']}, onnxruntime {meta['onnxruntime']}, "
        f"{meta['sentences']} sentences, "
        f"max length {meta['max_length']}, median of {meta['repeats']} alternated runs; cpu-fp32 is the same "
        f"machine's {meta['cpus']} CPU cores.",
        "",
        "| beam | batch | system | target tok/s | sentences/s | ms a sentence | vs cpu-fp32 | identical to cuda-fp32 |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:  # ms a sentence: the batch's time shared out (at batch 1, the latency target)
        lines.append(
            f"| {r['beam']} | {r['batch']} | {r['system']} | {r['tokens_per_s']:.0f} | {r['sentences_per_s']:.1f} | "
            f"{1000 / r['sentences_per_s']:.2f} | {_ratio(r['vs_cpu'])} | {r['identical_to_cuda_fp32']:.0%} |"
        )
    lines += [f"\n{system} could not run: `{error}`" for system, error in failed.items()]
    write_report(out, "\n".join(lines) + "\n", {"meta": meta, "rows": rows})
    print(f"wrote {report_path(out, '.md')} and {report_path(out, '.json')}")
    return 0


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def random_checkpoint(preset: str, vocab: Path, path: Path) -> Path:
    """A checkpoint of ``preset`` with seeded random weights and ``vocab``'s vocabulary."""
    import torch

    from training.checkpoint import read_vocab_files, save
    from training.config import load_config
    from training.model import Transformer

    config = load_config(preset)
    config.data.vocab = str(vocab)
    torch.manual_seed(config.train.seed)
    model = Transformer(config.model)
    save(path, {"config": config.to_dict(), "model": model.state_dict(), "vocab_files": read_vocab_files(vocab)})
    return path


def _gpu_name() -> str:
    import subprocess

    try:
        name = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    return name or "unknown GPU"


if __name__ == "__main__":
    raise SystemExit(main())
