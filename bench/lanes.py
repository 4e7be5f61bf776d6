"""A batch split into lanes (running sets stepped by threads of their own) against one set on the same cores.

    python -m bench lanes [--bundle models/en-de] [--input data/en-de/test.tsv] [--sentences 128]
                          [--batch-sizes 32,128] [--configs 1x2,2x1] [--graphs auto] [--static-step]
                          [--provider cpu] [--beam 4] [--repeats 3] [--out docs/reports/lanes/report]

Each config ``LxT`` is an engine loaded with ``lanes=L`` and ``threads=T`` (onnxruntime's intra-op threads of each
session): ``1x2`` one running set whose graphs use two threads, ``2x1`` two sets of half the batch each, whose steps
each use one thread, one set's graph running while Python searches the other's (``Engine.load(lanes=...)``,
inference/engine.py). ``--static-step`` loads the static steps (the bundle's GPU set), each lane on sessions of its
own, as on a GPU. The configs translate INPUT's first sentences in batches of each size, alternated a b a b ...,
``--repeats`` times; a figure is the median. Also the share of best outputs equal to the first config's: float
graphs give 100 %, int8 graphs less (a sentence's batch mates move its rounding: docs/bundle.md, "Batch mates").
Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.loadtools import ROOT, command_line, machine, read_sources, report_dir, write_report
from core.translation import DecodeOptions
from inference.engine import Engine


def _config(text: str) -> tuple[int, int]:
    lanes, threads = (int(part) for part in text.split("x"))
    return lanes, threads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=ROOT / "models" / "en-de")
    parser.add_argument("--input", default=str(ROOT / "data" / "en-de" / "test.tsv"), help="TSV (first column)")
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--batch-sizes", default="32,128")
    parser.add_argument("--configs", default="1x2,2x1", help="LANESxTHREADS, comma-separated; the first is the base")
    parser.add_argument("--graphs", default="auto")
    parser.add_argument("--static-step", action="store_true", help="the static steps (the bundle's GPU set)")
    parser.add_argument("--provider", default="cpu")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(report_dir("lanes") / "report"))
    args = parser.parse_args(argv)

    names = args.configs.split(",")
    engines = {
        name: Engine.load(
            args.bundle,
            provider=args.provider,
            graphs=args.graphs,
            static_step=args.static_step,
            lanes=_config(name)[0],
            threads=_config(name)[1],
        )
        for name in names
    }
    base = names[0]
    texts = read_sources(args.input, args.sentences)
    sources = [engines[base].tokenize(t) for t in texts]
    options = DecodeOptions(beam_size=args.beam)

    def run(engine: Engine, batch: int) -> tuple[float, list[list[int]]]:
        started, out = time.perf_counter(), []
        for lo in range(0, len(sources), batch):
            out += [t.best.token_ids for t in engine.translate_ids(sources[lo : lo + batch], options)]
        return time.perf_counter() - started, out

    rows: list[dict[str, Any]] = []
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        for engine in engines.values():  # buckets opened, first calls at these shapes: not timed
            run(engine, batch)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        outputs: dict[str, list[list[int]]] = {}
        for _ in range(args.repeats):
            for name, engine in engines.items():
                elapsed, outputs[name] = run(engine, batch)
                seconds[name].append(elapsed)
        medians = {name: statistics.median(seconds[name]) for name in names}
        for name in names:
            tokens = sum(len(o) for o in outputs[name])
            same = sum(a == b for a, b in zip(outputs[name], outputs[base], strict=True))
            rows.append(
                {
                    "batch": batch,
                    "config": name,
                    "seconds": [round(s, 3) for s in seconds[name]],
                    "target_tok_s": round(tokens / medians[name]),
                    "vs_base": round(medians[base] / medians[name], 3),
                    "identical_to_base": round(same / len(sources), 3),
                }
            )
            print(
                f"batch {batch} {name}: {rows[-1]['target_tok_s']} tok/s, {rows[-1]['vs_base']:.2f}x {base}, "
                f"{same}/{len(sources)} identical",
                flush=True,
            )
    meta = {
        "command": command_line("lanes", argv),
        "bundle": str(args.bundle),
        "graphs": engines[base].graphs,
        "dtype": engines[base].graphs_dtype,
        "static_step": args.static_step,
        "provider": engines[base].provider,
        "sentences": len(sources),
        "beam": args.beam,
        "repeats": args.repeats,
        "machine": machine(),
    }
    lines = [
        "# Lanes: a batch as several running sets, each on a thread",
        "",
        f"`{meta['command']}`: {meta['bundle']} ({meta['graphs']} graphs, {meta['dtype']}"
        f"{', static steps' if args.static_step else ''}) on {meta['provider']}, {len(sources)} sentences, beam "
        f"{args.beam}, median of {args.repeats} alternated runs; {meta['machine']['cpus']} CPUs, load "
        f"{meta['machine']['load_average_1m_at_start']} at start. LxT: L lanes of T onnxruntime threads each.",
        "",
        f"| batch | config | target tok/s | vs {base} | best outputs identical to {base} |",
        "|---:|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['batch']} | {r['config']} | {r['target_tok_s']:,} | {r['vs_base']:.2f}x | "
        f"{r['identical_to_base'] * 100:.0f} % |"
        for r in rows
    ]
    markdown = "\n".join(lines) + "\n"
    write_report(Path(args.out), markdown, {"meta": meta, "rows": rows})
    print(markdown)
    print(f"wrote {args.out}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
