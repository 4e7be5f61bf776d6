"""What the repeated-n-gram guard does to quality, repetition and speed: one table, one run.

    python -m bench repeats BUNDLE TEST.tsv [TEST.tsv ...] [--sizes 0,3,4] [--beam 4] [--repeats 2]
                            [--out docs/reports/repeats/report]

For each test file and each ``no_repeat_ngram_size`` the service's engine translates the whole file (beam 4,
batches of 32, 2 threads) and the table gives sacrebleu BLEU and chrF, the share of translations that
repeat a word 3-gram the reference does not repeat ("loops"), and the decoding time. Sizes are run
alternately (0 3 4 0 3 4 ...) ``--repeats`` times and the time is the median, so they share the machine's
state. Writes ``OUT.md`` and ``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.loadtools import alternated, write_report
from core.translation import DecodeOptions
from inference.engine import Engine
from training.data import read_pairs


def repeats_words(text: str, n: int = 3) -> bool:
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return len(grams) != len(set(grams))


def main(argv: list[str] | None = None) -> int:
    import sacrebleu

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("tests", nargs="+", type=Path)
    p.add_argument("--sizes", default="0,3,4", help="no_repeat_ngram_size values, comma-separated (0: off)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2, help="alternated runs per size; time is their median")
    p.add_argument("--out", type=Path, default=None, help="write OUT.md and OUT.json")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    engine = Engine.load(args.bundle, threads=args.threads)
    rows = []
    for test in args.tests:
        pairs = read_pairs(test)
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        options = {n: DecodeOptions(beam_size=args.beam, no_repeat_ngram_size=n) for n in sizes}
        hyps, seconds = alternated(engine, sources, options, args.batch, args.repeats)
        for n in sizes:
            loops = sum(repeats_words(h) and not repeats_words(r) for h, r in zip(hyps[n], refs, strict=True))
            rows.append(
                {
                    "test": test.name,
                    "no_repeat_ngram_size": n,
                    "sentences": len(pairs),
                    "bleu": round(sacrebleu.corpus_bleu(hyps[n], [refs]).score, 2),
                    "chrf": round(sacrebleu.corpus_chrf(hyps[n], [refs]).score, 2),
                    "loops_percent": round(100 * loops / max(1, len(pairs)), 1),
                    "seconds": round(statistics.median(seconds[n]), 2),
                    "seconds_runs": [round(s, 2) for s in seconds[n]],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    lines = [
        f"`python -m bench repeats {args.bundle} ... --sizes {args.sizes} --beam {args.beam} "
        f"--repeats {args.repeats}` (bundle {engine.manifest['name']} {engine.manifest['version']}):",
        "",
        "| test set | no_repeat_ngram_size | BLEU | chrF | loops (%) | seconds (median) | time vs off |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        off = next((r for r in rows if r["test"] == row["test"] and r["no_repeat_ngram_size"] == 0), row)
        ratio = row["seconds"] / off["seconds"] if off["seconds"] else float("nan")
        lines.append(
            f"| {row['test']} | {row['no_repeat_ngram_size'] or 'off'} | {row['bleu']:.2f} | {row['chrf']:.2f} "
            f"| {row['loops_percent']:.1f} | {row['seconds']:.2f} | {ratio:.2f}x |"
        )
    table = "\n".join(lines) + "\n"
    print(table, end="")
    if args.out:
        write_report(args.out, table, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
