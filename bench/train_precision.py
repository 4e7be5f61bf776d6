"""Training speed, float32 against bf16 autocast, on the recipe's real first batches: one line per mode.

    python -m bench train-precision float32     # then, in a separate process:
    python -m bench train-precision bf16
    ONEDNN_PRIMITIVE_CACHE_CAPACITY=16384 python -m bench train-precision bf16

Builds the model and data of ``recipes/en-de-small.toml`` (needs data/en-de), then
trains ``--steps`` consecutive batches of epoch 0 (forward, label-smoothed loss, backward, Adam) and prints
the cumulative target tokens/s after each third of them, and how many distinct batch shapes they held.
Run each mode in its own process (oneDNN's kernel cache and the environment variable are per process),
side by side on an otherwise idle machine; peak memory: prefix ``/usr/bin/time -f %M``.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from training.config import load_config
from training.data import token_batches
from training.model import label_smoothed_nll
from training.train import Trainer, collate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["float32", "bf16"])
    p.add_argument("--config", default="recipes/en-de-small.toml")
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. data.pad_multiple=8")
    p.add_argument("--compile", action="store_true", help="train through torch.compile (inductor, dynamic shapes)")
    args = p.parse_args(argv)
    cfg = load_config("small", args.config, args.set)
    trainer = Trainer(cfg, "/tmp/train-precision-run")  # nothing is written there
    trainer.load_data()
    trainer.build()
    batches = token_batches(trainer.train, cfg.train.batch_tokens, cfg.train.seed, 0, multiple=cfg.data.pad_multiple)[
        : args.steps
    ]
    data = [collate(trainer.train, b, cfg, trainer.device) for b in batches]
    model = torch.compile(trainer.model, dynamic=True) if args.compile else trainer.model
    shapes = {(tuple(s.shape), tuple(t.shape)) for s, t, _ in data}
    marks = {len(data) * i // 3 for i in (1, 2, 3)}
    rates = []
    started, tokens = time.perf_counter(), 0
    for n, (src, tgt_in, tgt_out) in enumerate(data, start=1):
        for group in trainer.optimizer.param_groups:
            group["lr"] = trainer.lr(n)  # the recipe's warm-up, as in training
        trainer.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.mode == "bf16"):
            logits = model(src, tgt_in)
        count = int((tgt_out != cfg.model.pad_id).sum())
        loss, _ = label_smoothed_nll(logits, tgt_out, cfg.train.label_smoothing, cfg.model.pad_id)
        (loss / count).backward()
        trainer.optimizer.step()
        tokens += count
        if n in marks:
            rates.append(round(tokens / (time.perf_counter() - started)))
    cache = os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "default")
    print(
        f"{args.mode}{' compiled' if args.compile else ''} {' '.join(args.set)}: oneDNN cache {cache}, "
        f"{len(data)} steps, {len(shapes)} distinct shapes, "
        f"cumulative target tokens/s after each third: {rates}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
