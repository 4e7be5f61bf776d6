"""Two bundles' decoding speed side by side, and whether they translate alike: one table, one run.

    python -m bench bundle-speed A B [--input data/en-de/test.tsv] [--sentences 256] [--batch-sizes 1,8,32]
                                 [--beam 4] [--max-length 256] [--repeats 5] [--threads 2] [--graphs auto] [--out OUT]

For comparing two exports of the same weights (a graph change, a quantization) or two models. Both bundles are
loaded in this process, each with its own onnxruntime sessions. For each batch size the first ``--sentences``
sources of ``--input`` are cut into batches in file order, so a batch mixes lengths as callers' batches do (the
server's batcher sorts by length; direct engine users and `evaluate-bundle` do not). Each repeat runs A then B
(then B then A on the next repeat, so neither always runs on a warmer machine):

* the encoder graph alone on those batches;
* whole translations through the engine (tokenize, encoder, beam search with the decoder, detokenize).

The table gives each one's median seconds, B's speed as a ratio to A's (median of the per-repeat ratios, with
their range), and the share of sentences whose best translation is identical. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.loadtools import ROOT, machine, report_dir, write_report
from core.translation import DecodeOptions
from inference.engine import Engine
from training.data import read_pairs
from training.evaluate import translate_texts


def encoder_batches(engine: Engine, sources: list[str], batch: int) -> list[np.ndarray]:
    """The encoder's ``src_ids`` inputs for ``sources`` cut in batches, as the engine builds them."""
    ids = [engine.tokenize(s)[: engine.max_source_pieces] for s in sources]
    return [engine.source_batch(ids[start : start + batch]) for start in range(0, len(ids), batch)]


def time_encoder(engine: Engine, batches: list[np.ndarray]) -> float:
    session = engine.sessions["encoder"]
    started = time.perf_counter()
    for src in batches:
        session.run(None, {"src_ids": src})
    return time.perf_counter() - started


def summary(a: list[float], b: list[float]) -> dict[str, float]:
    ratios = [x / y for x, y in zip(a, b, strict=True)]  # B's speed relative to A's, per repeat
    return {
        "a_s": statistics.median(a),
        "b_s": statistics.median(b),
        "b_speedup": statistics.median(ratios),
        "low": min(ratios),
        "high": max(ratios),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", type=Path, help="the baseline bundle")
    p.add_argument("b", type=Path, help="the bundle compared with it")
    p.add_argument("--input", type=Path, default=ROOT / "data" / "en-de" / "test.tsv", help="TSV, first column")
    p.add_argument("--sentences", type=int, default=256)
    p.add_argument("--batch-sizes", default="1,8,32")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--max-length", type=int, default=256, help="length cap in pieces, EOS included")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--graphs", default="auto", help="the graph set of both bundles: auto, main, cuda, ...")
    p.add_argument(
        "--b-masked-step",
        action="store_true",
        help="B's engine steps with its caches in place (Engine.load masked_step; the bundle needs --masked-step): A "
        "and B may then be the same bundle",
    )
    p.add_argument("--out", type=Path, default=report_dir("bundle-speed") / "report")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.sentences < 1:
        p.error("--repeats and --sentences must be at least 1")
    sources = [s for s, _ in read_pairs(args.input)][: args.sentences]
    if not sources:
        p.error(f"{args.input} has no sentences")
    engines = {
        "A": Engine.load(args.a, threads=args.threads, graphs=args.graphs),
        "B": Engine.load(args.b, threads=args.threads, graphs=args.graphs, masked_step=args.b_masked_step),
    }
    for engine in engines.values():
        engine.warmup()
    options = DecodeOptions(beam_size=args.beam, max_length=args.max_length)
    rows: list[dict[str, Any]] = []
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        enc: dict[str, list[float]] = {"A": [], "B": []}
        full: dict[str, list[float]] = {"A": [], "B": []}
        hyps: dict[str, list[str]] = {}
        inputs = {key: encoder_batches(engine, sources, batch) for key, engine in engines.items()}
        for repeat in range(args.repeats):
            for key in ("A", "B") if repeat % 2 == 0 else ("B", "A"):
                enc[key].append(time_encoder(engines[key], inputs[key]))
                hyps[key], took = translate_texts(engines[key], sources, options, batch)
                full[key].append(took)
        identical = sum(x == y for x, y in zip(hyps["A"], hyps["B"], strict=True)) / len(sources)
        real = sum(int((src != engines["A"].pad_id).sum()) for src in inputs["A"])
        padded = sum(src.size for src in inputs["A"])
        row = {
            "batch": batch,
            "real_share": real / padded,
            "encoder": summary(enc["A"], enc["B"]),
            "translate": summary(full["A"], full["B"]),
            "identical": identical,
        }
        rows.append(row)
        e, t = row["encoder"], row["translate"]
        print(
            f"batch {batch}: encoder {e['a_s']:.3f}s vs {e['b_s']:.3f}s ({e['b_speedup']:.2f}x), "
            f"translate {t['a_s']:.2f}s vs {t['b_s']:.2f}s ({t['b_speedup']:.2f}x), identical {identical:.0%}",
            flush=True,
        )
    setup = {
        "a": str(args.a),
        "b": str(args.b),
        "a_model": {k: engines["A"].manifest.get(k) for k in ("name", "version", "quantize")},
        "b_model": {k: engines["B"].manifest.get(k) for k in ("name", "version", "quantize")},
        "input": str(args.input),
        "sentences": len(sources),
        "beam": args.beam,
        "max_length": args.max_length,
        "repeats": args.repeats,
        "threads": args.threads,
        "graphs": args.graphs,
        "b_masked_step": args.b_masked_step,
        "machine": machine(),
    }
    lines = [
        "# Two bundles side by side",
        "",
        f"Generated by `python -m bench bundle-speed` on {time.strftime('%Y-%m-%d')}: A = `{args.a}`, "
        f"B = `{args.b}`{' stepping with its masked step (caches in place)' if args.b_masked_step else ''}; "
        f"the first {len(sources)} sentences of `{args.input.name}` in file order, beam "
        f"{args.beam}, length cap {args.max_length}, {args.threads} threads, {args.graphs} graphs, {args.repeats} "
        "alternated repeats. "
        "Speed-up: A's seconds over B's, median of the per-repeat ratios (lowest-highest). Real tokens: the share "
        "of the encoder's input positions that are not padding.",
        "",
        "| batch | real tokens | encoder A s | encoder B s | encoder B speed-up | translate A s | translate B s "
        "| translate B speed-up | identical translations |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        e, t = row["encoder"], row["translate"]
        lines.append(
            f"| {row['batch']} | {row['real_share']:.0%} | {e['a_s']:.3f} | {e['b_s']:.3f} | "
            f"{e['b_speedup']:.2f}x ({e['low']:.2f}-{e['high']:.2f}) | {t['a_s']:.2f} | {t['b_s']:.2f} | "
            f"{t['b_speedup']:.2f}x ({t['low']:.2f}-{t['high']:.2f}) | {row['identical']:.0%} |"
        )
    markdown = "\n".join(lines) + "\n"
    print()
    print(markdown)
    write_report(args.out, markdown, {"setup": setup, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
