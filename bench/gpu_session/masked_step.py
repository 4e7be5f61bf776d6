"""A whole decoder step on onnxruntime's ``DecoderMaskedMultiHeadAttention`` against the step the engine runs now.

    PYTHONPATH=TREE python bench/gpu_session/masked_step.py [--provider cpu|cuda] [--batch-sizes 1,32,128]
                                                           [--positions 16,32,64] [--columns 128] [--repeats 100]
                                                           [--threads 2] [--model default|tiny] [--out FILE.json]

``bench/gpu_session/cache_step.py`` timed one attention layer. This times the default model's whole decoder step (a
seeded random model of the shipped shape: d_model 256, 4 heads, 6 + 2 layers, 8,000 pieces; fp32, the CPU's plain
attention elsewhere) two ways, on states that hold the same history:

- ``now``: the dynamic step the engine's ``DeviceState`` runs (training/incremental.py ``DecoderStep``): the cache
  of ``t`` columns gathered by the beam's reorder and grown by the new column into a new present;
- ``masked``: ``DecoderStep(masked=True)``: each layer's self-attention one ``DecoderMaskedMultiHeadAttention``
  (training/fused.py ``BeamCachedAttention``) over buffers of ``--columns`` columns bound as both past and present,
  column ``t`` written in place, each row's past read through a beam index: nothing gathered.

Every sentence of a batch (beam 4) is at position ``t``; each hypothesis continues a random one of its sentence's.
Before timing, the two steps' top-k ids must agree and their log-probabilities and attention rows match (exit
status 1 if not). Blocks of ``BLOCK`` runs alternate now / masked; a figure is the median block's µs a step. Not
in it: the host's work a masked step needs (the beam index and the key mask, a few numpy calls) and the rare moves
of a clock's columns (docs/inference-core.md, "The cache without moves").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from core.graphs import MASKED_STEP
from training.config import load_config
from training.export.trace import trace_module
from training.incremental import DecoderStep, decoder_example, masked_example, spec
from training.model import Transformer

BEAM = 4
BLOCK = 10
"""Runs timed back to back, the two steps' blocks alternating: one run each in turn would time each step with the
other's weights in the caches (on this CPU that made the dynamic step look 1.4x slower than back to back)."""


def _model(shape: str = "default") -> Transformer:
    """The shipped model's shape with seeded random weights, or ``tiny`` (the tests')."""
    if shape == "tiny":
        config = load_config("tiny")
    else:
        config = load_config("small", overrides=["model.encoder_layers=6", "model.decoder_layers=2"])
    torch.manual_seed(0)
    return Transformer(config.model).eval()


def export(model: Transformer, directory: Path) -> tuple[Path, Path]:
    """The dynamic step as bundles hold it (decoder.onnx, plain attention) and the masked one, fp32."""
    paths = directory / "decoder.onnx", directory / "masked.onnx"
    steps = (DecoderStep(model), decoder_example(model)), (DecoderStep(model, masked=True), masked_example(model))
    for role, path, (module, example) in zip(("decoder", MASKED_STEP), paths, steps, strict=True):
        contract = spec(role, model)
        trace_module(module, example, path, contract.input_names, contract.output_names, contract.dynamic_axes, 17)
    return paths


def states(
    model: Transformer, batch: int, t: int, columns: int, seed: int, provider: str = "cpu"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two steps' inputs for one state: ``batch`` sentences of ``BEAM`` hypotheses at position ``t``; the masked
    step's keys in the layout of the provider's kernel (CUDA's: (rows, heads, d_head / x, columns, x), x values in
    16 bytes)."""
    cfg = model.config
    rng = np.random.default_rng(seed)
    layers, heads, d_head, rows, src_len = cfg.decoder_layers, cfg.n_heads, cfg.d_model // cfg.n_heads, batch * BEAM, 20
    tokens = rng.integers(4, cfg.vocab_size, (batch, BEAM))
    positions = np.full(batch, t, np.int64)
    src_mask = np.zeros((batch, src_len), bool)
    src_mask[::2, -5:] = True  # every other sentence shorter
    cross = [rng.standard_normal((batch, heads, src_len, d_head)).astype(np.float32) for _ in range(2 * layers)]
    history = [rng.standard_normal((rows, heads, t, d_head)).astype(np.float32) for _ in range(2 * layers)]
    reorder = np.arange(rows) // BEAM * BEAM + rng.integers(0, BEAM, rows)
    k = np.array([2 * BEAM], np.int64)
    common = {"tokens": tokens, "positions": positions, "k": k, "src_mask": src_mask}
    common |= {f"cross_{kv}_{i}": cross[2 * i + j] for i in range(layers) for j, kv in enumerate("kv")}
    now = {**common, "reorder": reorder}
    now |= {f"past_{kv}_{i}": history[2 * i + j] for i in range(layers) for j, kv in enumerate("kv")}
    buffers = []
    for index, h in enumerate(history):
        buffer = np.zeros((rows, heads, columns, d_head), np.float32)
        buffer[:, :, :t] = h  # row p's history in row p, columns 0 .. t - 1 (a set admitted at step 0)
        if provider == "cuda" and index % 2 == 0:  # a key buffer
            x = 16 // buffer.itemsize
            split = buffer.reshape(rows, heads, columns, d_head // x, x).transpose(0, 1, 3, 2, 4)
            buffer = np.ascontiguousarray(split).reshape(rows, heads, columns, d_head)
        buffers.append(buffer)
    beams = np.zeros((batch, BEAM, columns), np.int32)
    beams[:, :, :t] = (reorder % BEAM).reshape(batch, BEAM, 1)
    masked = {**common, "beams": beams, "own": np.ones((rows, t + 1), np.int32), "step": np.array([t], np.int32)}
    masked |= {f"past_{kv}_{i}": buffers[2 * i + j] for i in range(layers) for j, kv in enumerate("kv")}
    return now, masked


class Bound:
    """A session and its IO binding: inputs placed on the device once, the masked step's buffers bound as both past
    and present, every other output allocated by onnxruntime on each run (as ``Engine.run_graph`` does)."""

    def __init__(self, session: ort.InferenceSession, feeds: dict[str, Any], device: tuple[str, int]):
        self.session, self.binding = session, session.io_binding()
        self.held = {
            name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v), *device) for name, v in feeds.items()
        }
        for name, value in self.held.items():
            self.binding.bind_ortvalue_input(name, value)
        self.outputs = [o.name for o in session.get_outputs()]
        for name in self.outputs:
            past = name.replace("present_", "past_")
            if name.startswith("present_") and past in self.held and "beams" in feeds:
                self.binding.bind_ortvalue_output(name, self.held[past])
            else:
                self.binding.bind_output(name, device[0], device[1])

    def run(self) -> float:
        started = time.perf_counter()
        self.session.run_with_iobinding(self.binding)
        return time.perf_counter() - started

    def read(self, name: str) -> np.ndarray:
        return self.binding.get_outputs()[self.outputs.index(name)].numpy()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--batch-sizes", default="1,32,128")
    parser.add_argument("--positions", default="16,32,64")
    parser.add_argument("--columns", type=int, default=128, help="the masked step's buffer columns (> positions)")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", choices=("default", "tiny"), default="default")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    model = _model(args.model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.log_severity_level = 3
    providers = ["CUDAExecutionProvider"] if args.provider == "cuda" else ["CPUExecutionProvider"]
    device = ("cuda", 0) if args.provider == "cuda" else ("cpu", 0)
    with tempfile.TemporaryDirectory() as tmp:
        paths = export(model, Path(tmp))
        now_session, masked_session = (ort.InferenceSession(str(p), options, providers=providers) for p in paths)
    cfg = model.config
    shape = f"d_model {cfg.d_model}, {cfg.encoder_layers} + {cfg.decoder_layers} layers, {cfg.vocab_size} pieces"
    print(f"onnxruntime {ort.__version__}, {args.provider}, {args.threads} threads, beam {BEAM}, fp32, {shape}")
    print("| batch | position | now µs | masked µs | masked / now | same top-k |")
    print("|---:|---:|---:|---:|---:|---|")
    results, all_same = [], True
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        for t in (int(p) for p in args.positions.split(",")):
            if t >= args.columns:
                raise SystemExit(f"--columns {args.columns} must exceed every position ({t})")
            now_feeds, masked_feeds = states(model, batch, t, args.columns, batch * 1000 + t, args.provider)
            now, masked = Bound(now_session, now_feeds, device), Bound(masked_session, masked_feeds, device)
            now.run(), masked.run()
            ids_same = np.array_equal(now.read("topk_ids"), masked.read("topk_ids"))
            close = np.allclose(now.read("topk_logprobs"), masked.read("topk_logprobs"), atol=1e-4) and np.allclose(
                now.read("attention"), masked.read("attention"), atol=1e-5
            )
            same = bool(ids_same and close)
            all_same &= same
            times: dict[str, list[float]] = {"now": [], "masked": []}
            for _ in range(10):  # warm both
                now.run(), masked.run()
            for _ in range(max(1, args.repeats // BLOCK)):  # blocks of runs, alternating: a decoder runs its steps
                for key, bound in (("now", now), ("masked", masked)):  # back to back, its weights in the caches
                    times[key].append(sum(bound.run() for _ in range(BLOCK)) / BLOCK)
            a, b = (statistics.median(times[key]) * 1e6 for key in ("now", "masked"))
            results.append({"batch": batch, "position": t, "now_us": a, "masked_us": b, "same_topk": same})
            print(f"| {batch} | {t} | {a:.0f} | {b:.0f} | {b / a:.2f} | {same} |", flush=True)
    if args.out:
        report = {"onnxruntime": ort.__version__, "provider": args.provider, "threads": args.threads}
        report |= {"columns": args.columns, "beam": BEAM, "results": results}
        Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
