"""A batch split into lanes (running sets stepped by threads of their own) against one set on the same cores.

    python -m bench lanes [--bundle models/en-de] [--input data/en-de/test.tsv] [--sentences 128]
                          [--batch-sizes 32,128] [--configs 1x2,2x1] [--graphs auto] [--static-step]
                          [--provider cpu] [--beam 4] [--server-options] [--bleu] [--repeats 3]
                          [--out docs/reports/lanes/report]

Each config ``LxT`` is an engine loaded with ``lanes=L`` and ``threads=T`` (onnxruntime's intra-op threads of each
session): ``1x2`` one running set whose graphs use two threads, ``2x1`` two sets of half the batch each, whose steps
each use one thread, one set's graph running while Python searches the other's (``Engine.load(lanes=...)``,
inference/engine.py). ``--static-step`` loads the static steps (the bundle's GPU set), each lane on sessions of its
own, as on a GPU. A config ending in ``-spin`` lets its decoder step's pool spin (``spinning="decoder"``, what
``python -m training evaluate`` and ``back-translate`` load). ``--server-options``: the server's n-gram guard and
length penalty instead of plain beam search; ``--bleu``: each config's BLEU and chrF against INPUT's second column
(sacrebleu; INPUT must hold ``--sentences`` pairs). The configs translate INPUT's first sentences in batches of
each size, alternated a b a b ..., ``--repeats`` times; a figure is the median. Also the share of best outputs
equal to the first config's: float graphs give 100 %, int8 graphs less (a sentence's batch mates move its
rounding: docs/bundle.md, "Batch mates").
Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.loadtools import (
    ROOT,
    SERVER_SEARCH,
    add_server_options,
    command_line,
    machine,
    read_sources,
    report_dir,
    write_report,
)
from core.translation import DecodeOptions
from inference.engine import Engine


def _config(text: str) -> tuple[int, int, bool | str]:
    """``LxT`` or ``LxT-spin``: lanes, threads, spinning."""
    shape, _, spin = text.partition("-")
    if spin not in ("", "spin"):
        raise SystemExit(f"config {text!r}: LANESxTHREADS, optionally followed by -spin")
    lanes, threads = (int(part) for part in shape.split("x"))
    return lanes, threads, "decoder" if spin else False


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
    add_server_options(parser)
    parser.add_argument("--bleu", action="store_true", help="score each config against INPUT's references")
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
            spinning=_config(name)[2],
        )
        for name in names
    }
    base = names[0]
    texts = read_sources(args.input, args.sentences)
    sources = [engines[base].tokenize(t) for t in texts]
    options = DecodeOptions(beam_size=args.beam)
    if args.server_options:
        options = dataclasses.replace(options, **SERVER_SEARCH)  # type: ignore[arg-type]
    references = _references(args.input, len(sources)) if args.bleu else []

    def run(engine: Engine, batch: int) -> tuple[float, list[Any]]:
        """Seconds, and each sentence's best hypothesis (its token_ids compared, its text scored)."""
        started, best = time.perf_counter(), []
        for lo in range(0, len(sources), batch):
            best += [t.best for t in engine.translate_ids(sources[lo : lo + batch], options)]
        return time.perf_counter() - started, best

    rows: list[dict[str, Any]] = []
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        for engine in engines.values():  # buckets opened, first calls at these shapes: not timed
            run(engine, batch)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        outputs: dict[str, list[Any]] = {}
        for _ in range(args.repeats):
            for name, engine in engines.items():
                elapsed, outputs[name] = run(engine, batch)
                seconds[name].append(elapsed)
        medians = {name: statistics.median(seconds[name]) for name in names}
        for name in names:
            tokens = sum(len(o.token_ids) for o in outputs[name])
            same = sum(a.token_ids == b.token_ids for a, b in zip(outputs[name], outputs[base], strict=True))
            scores = _scores([o.text for o in outputs[name]], references) if references else {}
            rows.append(
                {
                    "batch": batch,
                    "config": name,
                    "seconds": [round(s, 3) for s in seconds[name]],
                    "target_tok_s": round(tokens / medians[name]),
                    "vs_base": round(medians[base] / medians[name], 3),
                    "identical_to_base": round(same / len(sources), 3),
                    **scores,
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
        "server_options": args.server_options,
        "repeats": args.repeats,
        "machine": machine(),
    }
    search = " with the server's n-gram guard and length penalty" if args.server_options else ""
    lines = [
        "# Lanes: a batch as several running sets, each on a thread",
        "",
        f"`{meta['command']}`: {meta['bundle']} ({meta['graphs']} graphs, {meta['dtype']}"
        f"{', static steps' if args.static_step else ''}) on {meta['provider']}, {len(sources)} sentences, beam "
        f"{args.beam}{search}, median of {args.repeats} alternated runs; {meta['machine']['cpus']} CPUs, load "
        f"{meta['machine']['load_average_1m_at_start']} at start. LxT: L lanes of T onnxruntime threads each.",
        "",
        f"| batch | config | target tok/s | vs {base} | best outputs identical to {base} |"
        + (" BLEU | chrF |" if references else ""),
        "|---:|---|---:|---:|---:|" + ("---:|---:|" if references else ""),
    ]
    lines += [
        f"| {r['batch']} | {r['config']} | {r['target_tok_s']:,} | {r['vs_base']:.2f}x | "
        f"{r['identical_to_base'] * 100:.0f} % |" + (f" {r['bleu']:.2f} | {r['chrf']:.2f} |" if references else "")
        for r in rows
    ]
    markdown = "\n".join(lines) + "\n"
    write_report(Path(args.out), markdown, {"meta": meta, "rows": rows})
    print(markdown)
    print(f"wrote {args.out}.md")
    return 0


def _references(path: Path, n: int) -> list[str]:
    """The first ``n`` references of a TSV (second column), one a source ``read_sources`` read."""
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.split("\t", 1)[0].strip()]
    if len(lines) < n or any("\t" not in line for line in lines[:n]):
        raise SystemExit(f"--bleu: {path} must hold at least {n} source<TAB>reference lines (--sentences)")
    return [line.split("\t")[1].strip() for line in lines[:n]]


def _scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    import sacrebleu

    return {
        "bleu": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2),
    }


if __name__ == "__main__":
    sys.exit(main())
