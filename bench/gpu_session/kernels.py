"""The CUDA kernels of static-shape steps, by GPU time, from torch's profiler (CUPTI records every kernel of the
process, onnxruntime's included).

    PYTHONPATH=TREE python bench/gpu_session/kernels.py BUNDLE INPUT [--batch 1]

Decodes INPUT's first 12 sentences one at a time (beam 4), or with ``--batch N`` its first N in one batch, twice with
the bundle's static-shape steps, not captured (a captured graph's kernels are not traced one by one:
bench/gpu_session/replay_floor.py times the replays), and prints the kernels of the second pass. Needs torch with
CUDA (the GPU machine's has it). Session 27's tables: docs/reports/gpu/h200-2026-11-26c/kernels-b1*.txt, read in
docs/inference-core.md; ``--batch 128`` (session 44) says what a batch-128 step's ~0.4-0.6 ms of graph is made of.
"""

from __future__ import annotations

import sys

from torch.profiler import ProfilerActivity, profile

from core.translation import DecodeOptions
from inference.engine import Engine


def main(argv: list[str]) -> None:
    bundle, path = argv[0], argv[1]
    batch = int(argv[argv.index("--batch") + 1]) if "--batch" in argv else 1
    engine = Engine.load(bundle, provider="cuda", threads=2, static_step=True, cuda_graph=False)
    with open(path, encoding="utf-8") as lines:
        texts = [line.split("\t")[0] for line in lines if line.strip()][: 12 if batch == 1 else batch]
    options = DecodeOptions(beam_size=4)
    groups = [[text] for text in texts] if batch == 1 else [texts]
    for group in groups:
        engine.translate(group, options)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for group in groups:
            engine.translate(group, options)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))


if __name__ == "__main__":
    main(sys.argv[1:])
