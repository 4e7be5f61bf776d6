"""A dynamic decoder step with and without the attention rows it reports, on the CPU or on CUDA.

    PYTHONPATH=TREE python bench/gpu_session/lean_step.py BUNDLE [--graphs cuda|main] [--provider cpu|cuda]
                                                          [--batch-sizes 1,32] [--repeats 5] [--calls 200]

Every step computes the reported layer's attention rows, asked for or not: in fused graphs that layer's scores again
with plain operators (CUDA's MultiHeadAttention returns other scores than its CPU kernel). onnxruntime keeps a node
whose output nothing reads, so this builds the "lean" step by removing the ``attention`` output and every node only
it needed (with the ``onnx`` package, which the serving image does not have), then times both sessions on the same
random inputs (beam 4, 20 cached positions, 25 source positions), alternating, ``--calls`` runs each a repeat:
whether the engine should carry a second step graph without the rows (docs/inference-core.md, "Fewer kernels a
step"). Since session 41 a fused GPU set carries it (``decoder_lean``, training/export/lean.py, which builds it the
same way); this measures the two graphs alone, ``bench gpu --systems cuda-fp16w-fused,cuda-fp16w-fused-full`` the
engine with and without it. Point it at a set's ``decoder.onnx`` (the default) as before.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from core.bundle import read_manifest
from inference.engine import choose_providers
from training.export.feeds import random_step_inputs, typed
from training.export.lean import lean_graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle")
    parser.add_argument("--graphs", default="cuda", help="the graph set: main or a variant (default cuda)")
    parser.add_argument("--provider", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    bundle = Path(args.bundle)
    manifest = read_manifest(bundle)
    folder = bundle if args.graphs == "main" else bundle / args.graphs
    path = folder / "decoder.onnx"
    providers = choose_providers(args.provider)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.model_external_initializers_file_folder_path", str(folder))
    full = ort.InferenceSession(str(path), options, providers=providers)
    thin = ort.InferenceSession(lean_graph(path).SerializeToString(), options, providers=providers)
    print(
        f"{path}: {len(onnx.load(str(path), load_external_data=False).graph.node)} nodes as exported, "
        f"{full.get_providers()[0]}; lean outputs {[o.name for o in thin.get_outputs()]}"
    )
    rng = np.random.default_rng(0)
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        feeds = typed(random_step_inputs(manifest, batch, 4, rng), full)  # 25 source, 20 cached positions
        times: dict[str, list[float]] = {"full": [], "lean": []}
        for _ in range(args.repeats):
            for name, session in (("full", full), ("lean", thin)):
                outputs = [o.name for o in session.get_outputs()]
                session.run(outputs, feeds)
                started = time.perf_counter()
                for _ in range(args.calls):
                    session.run(outputs, feeds)
                times[name].append((time.perf_counter() - started) / args.calls * 1e6)
        ratios = sorted(f / t for f, t in zip(times["full"], times["lean"], strict=True))
        print(
            f"batch {batch} (beam 4): full {statistics.median(times['full']):.0f} us a step, lean "
            f"{statistics.median(times['lean']):.0f} us; lean speed-up {statistics.median(ratios):.3f}x "
            f"({ratios[0]:.3f}-{ratios[-1]:.3f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
