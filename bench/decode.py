"""Decoding speed: the ONNX engine vs the PyTorch reference decoder, side by side in one run.

    python -m bench decode --bundle BUNDLE --checkpoint CKPT [--input FILE] [--sentences 64]
                           [--batch-sizes 1,8,32] [--beams 1,4] [--threads 2] [--out docs/reports/decode/report]

Each configuration translates the same sentences with both decoders on the same number of threads and
reports target tokens/s (generated pieces, EOS not counted) and sentences/s, plus how many outputs differ
between the two (should be 0: the engine reproduces the reference). The reference beam search handles one
sentence at a time, so for beam > 1 its figures do not depend on the batch size. Without ``--input``,
sentences are drawn at random from the vocabulary's whole-word pieces. Results go to OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort
import torch

from bench.loadtools import report_dir, report_path, write_report
from core.tokenizer import WORD_START
from core.translation import DecodeOptions
from inference.engine import Engine
from training.checkpoint import load_model
from training.decode import beam_search, greedy, strip_eos
from training.model import Transformer


def generated_sentences(engine: Engine, n: int, seed: int = 1) -> list[str]:
    words = [p[1:] for p in engine.tokenizer.pieces if p.startswith(WORD_START) and p[1:].isalpha()]
    if not words:
        raise SystemExit("the vocabulary has no whole-word pieces to build sentences from; pass --input")
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def run_engine(engine: Engine, sources: list[list[int]], beam: int, batch: int) -> tuple[float, list[list[int]]]:
    options = DecodeOptions(beam_size=beam)
    outputs: list[list[int]] = []
    started = time.perf_counter()
    for start in range(0, len(sources), batch):
        outputs += [t.best.token_ids for t in engine.translate_ids(sources[start : start + batch], options)]
    return time.perf_counter() - started, outputs


def run_reference(model: Transformer, sources: list[list[int]], beam: int, batch: int) -> tuple[float, list[list[int]]]:
    options = DecodeOptions(beam_size=beam)
    max_pos, eos = model.config.max_positions, model.config.eos_id
    outputs: list[list[int]] = []
    started = time.perf_counter()
    if beam == 1:
        for start in range(0, len(sources), batch):
            chunk = sources[start : start + batch]
            lens = [options.max_steps(len(s), max_pos) for s in chunk]
            outputs += [strip_eos(o.tokens, eos) for o in greedy(model, chunk, lens)]
    else:
        for s in sources:
            best = beam_search(model, s, beam, options.max_steps(len(s), max_pos), 1.0, 1)[0]
            outputs.append(strip_eos(best.tokens, eos))
    return time.perf_counter() - started, outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--bundle", required=True, help="bundle directory (python -m training export)")
    parser.add_argument("--checkpoint", required=True, help="the checkpoint the bundle was exported from")
    parser.add_argument("--input", help="file with one source sentence per line (TSV: first column)")
    parser.add_argument("--sentences", type=int, default=64, help="how many sentences (default 64)")
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--beams", default="1,4")
    parser.add_argument("--threads", type=int, default=2, help="threads for both decoders")
    parser.add_argument(
        "--out",
        default=str(report_dir("decode") / "report"),
        help="write OUT.md and OUT.json (default docs/reports/decode/report)",
    )
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    engine = Engine.load(args.bundle, provider="cpu", threads=args.threads)
    model, _, _ = load_model(args.checkpoint)
    if args.input:
        lines = Path(args.input).read_text(encoding="utf-8").splitlines()
        texts = [line.split("\t")[0] for line in lines if line.strip()][: args.sentences]
    else:
        texts = generated_sentences(engine, args.sentences)
    sources = [ids[: engine.max_source_pieces] for ids in map(engine.tokenize, texts) if ids]
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    beams = [int(b) for b in args.beams.split(",")]

    engine.warmup()
    run_reference(model, sources[:2], 1, 2)
    rows: list[dict[str, Any]] = []
    reference_cache: dict[int, tuple[float, list[list[int]]]] = {}
    for beam in beams:
        for batch in batch_sizes:
            e_time, e_out = run_engine(engine, sources, beam, batch)
            if beam == 1 or beam not in reference_cache:  # beam search reference ignores the batch
                reference_cache[beam] = run_reference(model, sources, beam, batch)
            r_time, r_out = reference_cache[beam]
            tokens = sum(len(o) for o in e_out)
            ref_tokens = sum(len(o) for o in r_out)
            row = {
                "beam": beam,
                "batch": batch,
                "sentences": len(sources),
                "engine_tokens_per_s": tokens / e_time,
                "engine_sentences_per_s": len(sources) / e_time,
                "reference_tokens_per_s": ref_tokens / r_time,
                "reference_sentences_per_s": len(sources) / r_time,
                "speedup": r_time / e_time,
                "different_outputs": sum(a != b for a, b in zip(e_out, r_out, strict=True)),
            }
            rows.append(row)
            print(
                f"beam {beam} batch {batch:>3}: engine {row['engine_tokens_per_s']:8.0f} tok/s, "
                f"reference {row['reference_tokens_per_s']:8.0f} tok/s, x{row['speedup']:.1f}, "
                f"{row['different_outputs']} different",
                flush=True,
            )

    arch = engine.manifest["architecture"]
    setup = {
        "bundle": engine.manifest["name"] + " " + engine.manifest["version"],
        "model": f"d{arch['d_model']} {arch['encoder_layers']}+{arch['decoder_layers']} layers, "
        f"ff {arch['d_ff']}, vocab {arch['vocab_size']}",
        "export": {k: engine.manifest["export"][k] for k in ("dtype", "quantize", "opset")},
        "sentences": len(sources),
        "source_pieces": sum(map(len, sources)),
        "input": args.input or "generated",
        "threads": args.threads,
        "provider": engine.provider,
        "cpu": platform.processor() or platform.machine(),
        "onnxruntime": ort.__version__,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    table = [
        "| beam | batch | engine tok/s | engine sent/s | reference tok/s | reference sent/s | speed-up "
        "| outputs differing |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        table.append(
            f"| {r['beam']} | {r['batch']} | {r['engine_tokens_per_s']:.0f} | "
            f"{r['engine_sentences_per_s']:.1f} | {r['reference_tokens_per_s']:.0f} | "
            f"{r['reference_sentences_per_s']:.1f} | {r['speedup']:.1f}x | {r['different_outputs']} |"
        )
    markdown = "\n".join(
        [
            "# Decoding speed: ONNX engine vs PyTorch reference decoder",
            "",
            f"Generated by `python -m bench decode` on {setup['date']}: {setup['model']} "
            f"({setup['bundle']}, {setup['export']['dtype']}, quantize {setup['export']['quantize']}), "
            f"{setup['sentences']} sentences ({setup['input']}), threads: {setup['threads']}, "
            f"{setup['provider']}, onnxruntime {setup['onnxruntime']}, torch {setup['torch']}.",
            "Target tokens are generated pieces without EOS. The reference beam search decodes one sentence "
            "at a time, so its beam > 1 rows do not depend on the batch size.",
            "",
            *table,
            "",
        ]
    )
    print()
    print(markdown)
    out = Path(args.out)
    write_report(out, markdown, {"setup": setup, "results": rows})
    print(f"wrote {report_path(out, '.md')} and {report_path(out, '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
