"""A vocabulary shortlist on the CPU: decoding speed and translation quality with and without it, one engine each.

    python -m bench shortlist BUNDLE --inputs data/en-de-next/test.*.tsv [--reverse] [--sentences 200]
                              [--batch-sizes 1,8,32] [--repeats 3] [--threads 2] [--out docs/reports/shortlist/report]
                              [--most FRACTION] [--speed-only]

BUNDLE must hold a shortlist (``python -m training shortlist``). Two engines on the bundle's main graphs, the
server's decoding defaults: ``Engine.load(shortlist=False)`` and ``shortlist=True``.

* **Speed**: ``--sentences`` sources drawn evenly from the inputs, translated in batches of each size by one engine
  then the other, ``--repeats`` times alternated; sentences/s, and the ratio of the two in each repeat. As the
  engine serves: a set whose lists together exceed ``Engine.shortlist_most`` of the vocabulary decodes with all of it
  (``--most`` sets another fraction: 1 holds every set to its lists).
* **Quality**: every pair of the inputs translated by both (batches of 32), every sentence held to its own list as
  when it decodes alone (``shortlist_most`` 1 for this part): BLEU and chrF (sacrebleu) per file, the share of best
  translations identical, each sentence's list size, and how many full-vocabulary translations use only pieces of
  their sentence's list (those the list cannot change).

Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench.loadtools import machine, report_dir, write_report


def _read(paths: list[str], reverse: bool) -> dict[str, list[tuple[str, str]]]:
    from training.data import read_tsv

    return {
        Path(name).name: [(t, s) if reverse else (s, t) for s, t in read_tsv(name) if s.strip() and t.strip()]
        for name in paths
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("bundle", help="bundle directory with a shortlist")
    parser.add_argument("--inputs", nargs="+", required=True, help="held-out TSV files (source<TAB>reference)")
    parser.add_argument("--reverse", action="store_true", help="the files are reference<TAB>source")
    parser.add_argument("--sentences", type=int, default=200, help="sources of the speed runs")
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(report_dir("shortlist") / "report"))
    parser.add_argument(
        "--most",
        type=float,
        help="the shortlisted engine's shortlist_most for the speed runs (default: the engine's, as it serves); "
        "1 holds every set to its lists, to find where the shortlist stops paying",
    )
    parser.add_argument("--speed-only", action="store_true", help="skip the quality part")
    args = parser.parse_args(argv)

    import numpy as np
    import sacrebleu

    from core.translation import DecodeOptions
    from inference.engine import Engine
    from service.settings import Settings

    sets = _read(args.inputs, args.reverse)
    settings = Settings()
    options = DecodeOptions(
        beam_size=4, length_penalty=settings.length_penalty, no_repeat_ngram_size=settings.no_repeat_ngram_size
    )
    engines = {
        name: Engine.load(args.bundle, provider="cpu", threads=args.threads, shortlist=name == "shortlist")
        for name in ("full", "shortlist")
    }
    listed = engines["shortlist"].shortlist
    assert listed is not None
    if args.most is not None:
        engines["shortlist"].shortlist_most = args.most
    most = engines["shortlist"].shortlist_most

    every = [source for pairs in sets.values() for source, _ in pairs]
    step = max(1, len(every) // max(1, args.sentences))
    drawn = every[::step][: args.sentences]
    speed: list[dict[str, Any]] = []
    for batch in map(int, args.batch_sizes.split(",")):
        seconds: dict[str, list[float]] = {name: [] for name in engines}
        for engine in engines.values():  # warm-up
            engine.translate(drawn[:batch], options)
        for _ in range(args.repeats):
            for name, engine in engines.items():
                started = time.perf_counter()
                for i in range(0, len(drawn), batch):
                    engine.translate(drawn[i : i + batch], options)
                seconds[name].append(time.perf_counter() - started)
        ratios = [f / s for f, s in zip(seconds["full"], seconds["shortlist"], strict=True)]
        row = {
            "batch": batch,
            "full_sentences_per_s": len(drawn) / statistics.median(seconds["full"]),
            "shortlist_sentences_per_s": len(drawn) / statistics.median(seconds["shortlist"]),
            "ratio": statistics.median(ratios),
            "ratios": ratios,
        }
        speed.append(row)
        print(
            f"batch {batch}: {row['full_sentences_per_s']:.1f} -> {row['shortlist_sentences_per_s']:.1f} sentences/s, "
            f"{row['ratio']:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
            flush=True,
        )

    # Quality with every sentence held to its own list, as when it decodes alone: the batches of 32 below would
    # otherwise mostly exceed ``shortlist_most`` and decode with the whole vocabulary.
    engines["shortlist"].shortlist_most = 1.0
    quality: list[dict[str, Any]] = []
    for name, pairs in {} if args.speed_only else sets.items():
        sources, references = [p[0] for p in pairs], [p[1] for p in pairs]
        out: dict[str, list[Any]] = {}
        for engine_name, engine in engines.items():
            out[engine_name] = []
            for i in range(0, len(sources), 32):
                out[engine_name] += engine.translate(sources[i : i + 32], options)
        texts = {k: [t.best.text for t in v] for k, v in out.items()}
        lists = [listed.sentence(engines["full"].tokenize(s)) for s in sources]
        inside = [bool(np.isin(t.best.token_ids, own).all()) for t, own in zip(out["full"], lists, strict=True)]
        row = {"set": name, "sentences": len(sources)}
        for engine_name in engines:
            row[f"{engine_name}_bleu"] = sacrebleu.corpus_bleu(texts[engine_name], [references]).score
            row[f"{engine_name}_chrf"] = sacrebleu.corpus_chrf(texts[engine_name], [references]).score
        row["identical"] = sum(a == b for a, b in zip(texts["full"], texts["shortlist"], strict=True)) / len(sources)
        row["inside"] = sum(inside) / len(sources)
        row["list_mean"] = float(np.mean([len(x) for x in lists]))
        quality.append(row)
        print(
            f"{name}: BLEU {row['full_bleu']:.2f} -> {row['shortlist_bleu']:.2f}, chrF {row['full_chrf']:.2f} -> "
            f"{row['shortlist_chrf']:.2f}, identical {row['identical']:.1%}, full translations inside their list "
            f"{row['inside']:.1%}, list {row['list_mean']:.0f} pieces",
            flush=True,
        )

    host = machine()
    meta = engines["shortlist"].manifest["shortlist"]
    lines = [
        "# A vocabulary shortlist on the CPU",
        "",
        f"Generated by `python -m bench shortlist` ({host['cpus']} CPUs, load {host['load_average_1m_at_start']}): "
        f"{engines['full'].manifest['name']} {engines['full'].manifest['version']} ({engines['full'].graphs_dtype}), "
        f"shortlist of {meta['frequent']} frequent pieces + {meta['per_piece']} a source piece"
        f"{' + the source pieces' if meta.get('copy_source', True) else ''}; beam 4, the server's defaults, "
        f"{args.threads} threads.",
        "",
        f"Speed: {len(drawn)} sentences in batches of each size, median of {args.repeats} alternated runs; a set "
        f"whose lists together hold more than {most:g} of the vocabulary decodes with all of it (shortlist_most).",
        "",
        "| batch | full vocabulary, sentences/s | shortlist, sentences/s | shortlist / full (per run) |",
        "|---:|---:|---:|---|",
    ]
    for row in speed:
        lines.append(
            f"| {row['batch']} | {row['full_sentences_per_s']:.1f} | {row['shortlist_sentences_per_s']:.1f} | "
            f"{row['ratio']:.2f}x ({min(row['ratios']):.2f}–{max(row['ratios']):.2f}) |"
        )
    lines += (
        []
        if args.speed_only
        else [
            "",
            "Quality: every pair of each input, batches of 32, each sentence held to its own list (as alone).",
            "",
            "| set | sentences | BLEU full | BLEU shortlist | chrF full | chrF shortlist | identical "
            "| full inside list | list pieces |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
    )
    for row in quality:
        lines.append(
            f"| {row['set']} | {row['sentences']} | {row['full_bleu']:.2f} | {row['shortlist_bleu']:.2f} | "
            f"{row['full_chrf']:.2f} | {row['shortlist_chrf']:.2f} | {row['identical']:.1%} | {row['inside']:.1%} | "
            f"{row['list_mean']:.0f} |"
        )
    data = {"machine": host, "shortlist": meta, "shortlist_most": most, "speed": speed, "quality": quality}
    write_report(Path(args.out), "\n".join(lines) + "\n", data)
    print(f"wrote {args.out}.md")
    return 0
