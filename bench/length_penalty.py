"""Which length penalty the server should default to: BLEU, chrF and output length per value, one run.

    python -m bench length-penalty BUNDLE DEV.tsv [TEST.tsv ...] [--values 1.0,1.2,1.4,1.6,1.8,2.0]
                                   [--beam 4] [--out docs/reports/length-penalty/report]

The service's engine translates every file with every value (beam 4, batches of 32, 2 threads, the server's
n-gram guard), the values alternated ``--repeats`` times (1.0 1.4 ... 1.0 1.4 ...) so they share the machine's
state, and the table gives sacrebleu BLEU, chrF, the length ratio (hypothesis / reference words, sacrebleu's
tokenization: below 1, translations are shorter than the references) and the median decoding time relative
to the first value's. Choose the value on the
first file (dev); the others show whether the choice holds on text it was not chosen on. Writes OUT.md
and OUT.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.loadtools import alternated, write_report
from core.translation import DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions
from inference.engine import Engine
from training.data import read_pairs


def score(hyps: list[str], refs: list[str]) -> dict[str, float]:
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    return {
        "bleu": round(bleu.score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
        "length_ratio": round(bleu.sys_len / max(1, bleu.ref_len), 3),
    }


def markdown(rows: list[dict[str, object]], files: list[str], values: list[float], heading: str) -> str:
    header = " | ".join(f"{name} BLEU / chrF / length / time" for name in files)
    lines = [heading, "", f"| length penalty | {header} |", "|---:|" + "---:|" * len(files)]
    for value in values:
        cells = []
        for name in files:
            r = next(r for r in rows if r["file"] == name and r["length_penalty"] == value)
            first = next(r for r in rows if r["file"] == name and r["length_penalty"] == values[0])
            time = float(r["seconds"]) / float(first["seconds"])  # type: ignore[arg-type]
            cells.append(f"{r['bleu']:.2f} / {r['chrf']:.2f} / {r['length_ratio']:.3f} / {time:.2f}x")
        lines.append(f"| {value:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("files", nargs="+", type=Path, help="the dev file first, then test files")
    p.add_argument("--values", default="1.0,1.2,1.4,1.6,1.8,2.0", help="length penalties, comma-separated")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1, help="alternated runs per value; time is their median")
    p.add_argument("--out", type=Path, default=None, help="write OUT.md and OUT.json")
    args = p.parse_args(argv)
    values = [float(v) for v in args.values.split(",")]
    engine = Engine.load(args.bundle, threads=args.threads)
    rows: list[dict[str, object]] = []
    for path in args.files:
        pairs = read_pairs(path)
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        options = {
            value: DecodeOptions(
                beam_size=args.beam, length_penalty=value, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE
            )
            for value in values
        }
        hyps, seconds = alternated(engine, sources, options, args.batch, args.repeats)
        for value in values:
            rows.append(
                {
                    "file": path.name,
                    "length_penalty": value,
                    "sentences": len(pairs),
                    **score(hyps[value], refs),
                    "seconds": round(statistics.median(seconds[value]), 2),
                    "seconds_runs": [round(t, 2) for t in seconds[value]],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    manifest = engine.manifest
    heading = (
        f"`python -m bench length-penalty {args.bundle} {' '.join(str(f) for f in args.files)} "
        f"--values {args.values} --beam {args.beam} --repeats {args.repeats}` "
        f"(bundle {manifest['name']} {manifest['version']}):"
    )
    table = markdown(rows, [f.name for f in args.files], values, heading)
    print(table, end="")
    if args.out:
        write_report(args.out, table, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
