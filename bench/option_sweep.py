"""Sweep one decoding option (length penalty, repeated n-gram guard) over its values: quality, length, loops, time.

    python -m bench option-sweep length_penalty BUNDLE DEV.tsv [TEST.tsv ...] [--values 1.0,1.2,1.4,1.6]
    python -m bench option-sweep no_repeat_ngram_size BUNDLE TEST.tsv [...] [--values 0,3,4]
                                 [--beam 4] [--repeats 2] [--out docs/reports/length-penalty/report]

The service's engine translates every file with every value (beam 4, batches of 32, 2 threads; the other
options at the server's defaults), the values alternated ``--repeats`` times (a b c a b c ...) so they share the
machine's state. Per file and value the table gives sacrebleu BLEU and chrF, the length ratio (hypothesis /
reference words, sacrebleu's tokenization: below 1, translations are shorter than the references), the share of
translations that repeat a word 3-gram their reference does not repeat ("loops"), and the median decoding time
relative to the first value's. Choose on the first file (dev); the others show whether the choice holds on text
it was not chosen on. With ``--out``, writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from bench.loadtools import alternated, command_line, write_report
from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions
from inference.engine import Engine
from training.data import read_pairs

OPTIONS: dict[str, tuple[type, str]] = {
    "length_penalty": (float, "1.0,1.2,1.4,1.6,1.8,2.0"),
    "no_repeat_ngram_size": (int, "0,3,4"),
}


def repeats_words(text: str, n: int = 3) -> bool:
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return len(grams) != len(set(grams))


def score(hyps: list[str], refs: list[str]) -> dict[str, float]:
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    loops = sum(repeats_words(h) and not repeats_words(r) for h, r in zip(hyps, refs, strict=True))
    return {
        "bleu": round(bleu.score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
        "length_ratio": round(bleu.sys_len / max(1, bleu.ref_len), 3),
        "loops_percent": round(100 * loops / max(1, len(hyps)), 1),
    }


def options_for(option: str, value: float, beam: int) -> DecodeOptions:
    settings: dict[str, Any] = {
        "beam_size": beam,
        "length_penalty": DEFAULT_LENGTH_PENALTY,
        "no_repeat_ngram_size": DEFAULT_NO_REPEAT_NGRAM_SIZE,
    }
    settings[option] = value
    return DecodeOptions(**settings)


def markdown(rows: list[dict[str, Any]], option: str, values: list[float], heading: str) -> str:
    lines = [
        heading,
        "",
        f"| file | {option} | BLEU | chrF | length | loops (%) | time vs {values[0]:g} |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        first = next(r for r in rows if r["file"] == row["file"] and r["value"] == values[0])
        ratio = row["seconds"] / first["seconds"] if first["seconds"] else float("nan")
        lines.append(
            f"| {row['file']} | {row['value']:g} | {row['bleu']:.2f} | {row['chrf']:.2f} | {row['length_ratio']:.3f} "
            f"| {row['loops_percent']:.1f} | {ratio:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("option", choices=sorted(OPTIONS), help="the decoding option to sweep")
    p.add_argument("bundle", type=Path)
    p.add_argument("files", nargs="+", type=Path, help="TSV files: the dev file first, then test files")
    p.add_argument("--values", help="comma-separated (default: length_penalty 1.0..2.0, no_repeat_ngram_size 0,3,4)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1, help="alternated runs per value; time is their median")
    p.add_argument("--out", type=Path, default=None, help="write OUT.md and OUT.json")
    args = p.parse_args(argv)
    kind, default_values = OPTIONS[args.option]
    values = [kind(v) for v in (args.values or default_values).split(",")]
    engine = Engine.load(args.bundle, threads=args.threads)
    rows: list[dict[str, Any]] = []
    for path in args.files:
        pairs = read_pairs(path)
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        options = {value: options_for(args.option, value, args.beam) for value in values}
        hyps, seconds = alternated(engine, sources, options, args.batch, args.repeats)
        for value in values:
            rows.append(
                {
                    "file": path.name,
                    "option": args.option,
                    "value": value,
                    "sentences": len(pairs),
                    **score(hyps[value], refs),
                    "seconds": round(statistics.median(seconds[value]), 2),
                    "seconds_runs": [round(t, 2) for t in seconds[value]],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    heading = f"`{command_line('option-sweep', argv)}` (bundle {engine.manifest['name']} {engine.manifest['version']}):"
    table = markdown(rows, args.option, values, heading)
    print(table, end="")
    if args.out:
        write_report(args.out, table, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
