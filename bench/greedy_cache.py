"""Dev-evaluation greedy search: the recomputing reference decoder vs the cached one training now uses.

    python -m bench greedy-cache [--checkpoint runs/en-de/ship/averaged.pt] [--input data/en-de/dev.tsv]
                                 [--sentences 64] [--threads 2]

One batch, the length cap training uses (1.5 x source + 5); prints both times, the ratio and how many
outputs are the same token for token.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.loadtools import ROOT
from training.cached_decode import cached_greedy
from training.checkpoint import load_model, load_tokenizer
from training.decode import greedy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--checkpoint", default=str(ROOT / "runs" / "en-de" / "ship" / "averaged.pt"))
    parser.add_argument("--input", default=str(ROOT / "data" / "en-de" / "dev.tsv"))
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    model, _, vocab_files = load_model(args.checkpoint)
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = load_tokenizer(vocab_files, tmp)
    lines = Path(args.input).read_text(encoding="utf-8").splitlines()[: args.sentences]
    sources = [tokenizer.encode_source(line.split("\t")[0]) for line in lines]
    caps = [min(model.config.max_positions, int(1.5 * len(s)) + 5) for s in sources]
    started = time.perf_counter()
    cached = cached_greedy(model, sources, caps)
    cached_s = time.perf_counter() - started
    started = time.perf_counter()
    reference = greedy(model, sources, caps)
    reference_s = time.perf_counter() - started
    same = sum(a.tokens == b.tokens for a, b in zip(cached, reference, strict=True))
    print(
        f"{len(sources)} sentences, one batch, {args.threads} threads: reference greedy {reference_s:.1f} s, "
        f"cached greedy {cached_s:.1f} s ({reference_s / cached_s:.1f}x); same tokens: {same}/{len(sources)}"
    )
    return 0 if same == len(sources) else 1


if __name__ == "__main__":
    sys.exit(main())
