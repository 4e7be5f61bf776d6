"""Whether reduced precision flips the beams of the GPU tests' model with 32-value heads (testkit.tiny
``wide_heads_checkpoint``), read on the CPU: fp16 graphs there round more than CUDA's TF32 products (10 bits of
mantissa both, but fp16 in every tensor), so a model whose beams fp16 keeps is a model whose beams TF32 keeps.

    PYTHONPATH=. python bench/gpu_session/tf32_proxy.py [--steps 1,400] [--out FILE]

For each number of training steps (1: next to the random initial weights): the test texts of
tests/inference/test_cuda.py decoded as its tests do (beam 4, n-best 2, batch 24) by the fp32 main graphs and by the
fp16 GPU set, both on the CPU: how many texts keep all their hypotheses and the largest score difference (the tests
allow 1e-2). Then whether the tests can see a wrong key layout: the fp32 GPU set's decoder-masked static steps told
CUDA's layout on the CPU (whose kernel reads the plain one) against the reference, texts whose beams stay and the
largest score difference.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from inference.engine import Engine
from testkit.synthetic import write_corpus
from testkit.tiny import wide_heads_checkpoint
from tests.inference.test_cuda import BEAM, _decode
from training.export import export_bundle
from training.vocab import train_vocab


def _compare(a: Engine, b: Engine) -> tuple[int, float]:
    want, got = _decode(a, BEAM, 24), _decode(b, BEAM, 24)
    same = sum(
        [h.token_ids for h in x.hypotheses] == [h.token_ids for h in y.hypotheses]
        for x, y in zip(want, got, strict=True)
    )
    diff = max(
        abs(p.score - q.score)
        for x, y in zip(want, got, strict=True)
        for p, q in zip(x.hypotheses, y.hypotheses, strict=False)
    )
    return same, diff


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="1,400")
    parser.add_argument("--out", help="also write the lines to this file")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tf32-proxy-"))
    train, dev = write_corpus(work / "corpus")  # the tests' corpus and vocabulary (tests/conftest.py)
    train_vocab(train, work / "vocab", vocab_size=96)
    lines = []
    meta = {"name": "wide-heads", "version": "1", "source_language": "en", "target_language": "de"}
    for steps in (int(s) for s in args.steps.split(",")):
        checkpoint = wide_heads_checkpoint(train, dev, work / "vocab", work / f"run-{steps}", steps=steps)
        fp16, fp32 = work / f"fp16-{steps}", work / f"fp32-{steps}"
        export_bundle(checkpoint, fp16, **meta, gpu_dtype="fp16", gpu_attention="fused", tolerance=50.0)  # type: ignore[arg-type]
        reference = Engine.load(fp16, provider="cpu", threads=1)
        same, diff = _compare(reference, Engine.load(fp16, provider="cpu", threads=1, graphs="cuda"))
        kept = f"{same}/24 texts keep their beams, scores within {diff:.4f}"
        lines.append(f"{steps} steps: fp16 against fp32 on the CPU: {kept}")
        print(lines[-1], flush=True)
        how = {"gpu_dtype": "fp32", "gpu_attention": "fused", "static_step": True, "static_attention": "decoder-masked"}
        export_bundle(checkpoint, fp32, **meta, **how)  # type: ignore[arg-type]
        wrong = Engine.load(fp32, provider="cpu", threads=1, graphs="cuda", static_step=True)
        wrong.static_key_layout = np.zeros((4, 8), np.uint8)  # CUDA's fp32 layout of 32-value heads, on the CPU
        same, diff = _compare(Engine.load(fp32, provider="cpu", threads=1), wrong)
        kept = f"{same}/24 texts keep their beams, scores within {diff:.4f}"
        lines.append(f"{steps} steps: keys in the wrong layout: {kept}")
        print(lines[-1], flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
