"""Running sets against whole batches, in one process: where continuous batching's time goes, graph by graph.

    python -m bench running-sets [--bundle models/en-de] [--input data/en-de/test.tsv] [--mixed]
                                 [--sentences 192] [--size 16] [--beam 4] [--threads 2] [--repeats 2]
                                 [--out docs/reports/running-sets/report]

The same sentences decoded three ways by one engine, alternated ``--repeats`` times: ``batches`` translates
them ``--size`` at a time, each batch to its last sentence (what the batch scheduler does); ``refilled``
keeps ``--size`` sentences in one running set and admits the next ones as soon as sentences finish (what
each worker of the continuous scheduler does under a full queue), with cohorts as the engine keeps them on
the CPU; ``refilled, one cohort`` the same with cohorts off. Every graph call is timed (``Engine.run_graph``), so
the table splits each way's time between the encoder, the decoder step, the state graphs (merge, select,
trim) and the rest (the beam search's Python, tokens to text). It also counts decoder calls and the
cache cells the decoder steps carried (hypotheses x cache columns, summed): the padding a late
arrival pays for. No HTTP, no threads: ``bench load`` measures the server. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.load import mixed_texts
from bench.loadtools import ROOT, machine, report_dir, write_report
from core.translation import DecodeOptions
from inference import engine as engine_module
from inference.engine import DeviceState, Engine

ROLES = ("encoder", "decoder", "merge", "select", "trim")


class Meter:
    """Seconds per graph role and decoder cache cells, while installed on an engine."""

    def __init__(self, engine: Engine):
        self.seconds: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.cells = 0
        run, step = engine.run_graph, DeviceState.step

        def timed(role: str, *args: Any, **kwargs: Any) -> list[Any]:
            started = time.perf_counter()
            try:
                return run(role, *args, **kwargs)
            finally:
                self.seconds[role] += time.perf_counter() - started
                self.calls[role] += 1

        def counted(
            state: DeviceState, tokens: Any, positions: Any, reorder: Any, k: int, *rest: Any, **kw: Any
        ) -> Any:
            self.cells += reorder.size * state.cached
            return step(state, tokens, positions, reorder, k, *rest, **kw)

        engine.run_graph = timed  # type: ignore[method-assign]
        DeviceState.step = counted  # type: ignore[method-assign]

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()
        self.cells = 0


def batches(engine: Engine, sources: list[list[int]], options: DecodeOptions, size: int) -> None:
    for start in range(0, len(sources), size):
        engine.translate_ids(sources[start : start + size], options)


def refilled(engine: Engine, sources: list[list[int]], options: DecodeOptions, size: int) -> None:
    running, waiting, answered = engine.running_set(), collections.deque(enumerate(sources)), 0
    while waiting or running:
        room = min(size - len(running), len(waiting))
        if room > 0:
            running.admit([(key, ids, options) for key, ids in (waiting.popleft() for _ in range(room))])
        answered += len(running.step())
    assert answered == len(sources)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench running-sets", description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default=str(ROOT / "models" / "en-de"))
    parser.add_argument("--input", default=str(ROOT / "data" / "en-de" / "test.tsv"), help="TSV, first column")
    parser.add_argument("--mixed", action="store_true", help="1 to 100 words a sentence, as bench load --mixed")
    parser.add_argument("--sentences", type=int, default=192)
    parser.add_argument("--size", type=int, default=16, help="sentences in a batch / kept running")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(report_dir("running-sets") / "report"))
    args = parser.parse_args(argv)

    lines = [line.split("\t")[0] for line in Path(args.input).read_text(encoding="utf-8").splitlines() if line]
    texts = mixed_texts(lines, args.sentences) if args.mixed else lines[: args.sentences]
    engine = Engine.load(args.bundle, provider="cpu", threads=args.threads, cohorts=engine_module.COHORTS_CPU)
    sources = [engine.tokenize(text) for text in texts]
    options = DecodeOptions(beam_size=args.beam)
    meter = Meter(engine)
    engine.warmup()

    def one_cohort() -> None:
        engine.cohorts = 1
        try:
            refilled(engine, sources, options, args.size)
        finally:
            engine.cohorts = engine_module.COHORTS_CPU

    ways: dict[str, Callable[[], None]] = {
        "batches": lambda: batches(engine, sources, options, args.size),
        "refilled": lambda: refilled(engine, sources, options, args.size),
        "refilled, one cohort": one_cohort,
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in ways}
    for repeat in range(args.repeats):
        for name, way in ways.items():
            meter.reset()
            started = time.perf_counter()
            way()
            seconds = time.perf_counter() - started
            roles = {role: meter.seconds[role] for role in ROLES}
            runs[name].append(
                {
                    "seconds": seconds,
                    "roles": roles,
                    "rest": seconds - sum(roles.values()),
                    "calls": dict(meter.calls),
                    "cells": meter.cells,
                }
            )
            print(f"repeat {repeat + 1}, {name}: {len(sources) / seconds:.1f} sentences/s", file=sys.stderr)

    def median(name: str, value: Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(value(run) for run in runs[name])

    rows = []
    for name in ways:
        seconds = median(name, lambda r: r["seconds"])
        row = {
            "way": name,
            "sentences_per_s": len(sources) / seconds,
            "seconds": seconds,
            **{role: median(name, lambda r, role=role: r["roles"][role]) for role in ROLES},
            "rest": median(name, lambda r: r["rest"]),
            "encoder_calls": median(name, lambda r: r["calls"].get("encoder", 0)),
            "decoder_calls": median(name, lambda r: r["calls"].get("decoder", 0)),
            "cells_millions": median(name, lambda r: r["cells"]) / 1e6,
        }
        rows.append(row)
    base = rows[0]["seconds"]
    title = "mixed lengths (1-100 words)" if args.mixed else "test sentences"
    markdown = [
        "# Running sets against whole batches, in one process",
        "",
        f"Generated by `python -m bench running-sets{' --mixed' if args.mixed else ''} --sentences {args.sentences} "
        f"--size {args.size} --beam {args.beam} --threads {args.threads} --repeats {args.repeats}`: "
        f"{engine.manifest['name']} {engine.manifest['version']} ({engine.graphs_dtype}), {len(sources)} {title}, "
        f"{args.size} at a time, medians of {args.repeats} alternated runs. Seconds per graph role; rest: the beam "
        "search's Python and tokens to text.",
        "",
        "| way | sentences/s | time vs batches | encoder s (calls) | decoder s (calls) | merge s | select s | trim s "
        "| rest s | decoder cache cells (M) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        markdown.append(
            f"| {r['way']} | {r['sentences_per_s']:.1f} | {r['seconds'] / base:.2f}x | {r['encoder']:.2f} "
            f"({r['encoder_calls']:.0f}) | {r['decoder']:.2f} ({r['decoder_calls']:.0f}) | {r['merge']:.2f} | "
            f"{r['select']:.2f} | {r['trim']:.2f} | {r['rest']:.2f} | {r['cells_millions']:.2f} |"
        )
    text = "\n".join(markdown) + "\n"
    print(text)
    write_report(Path(args.out), text, {"machine": machine(), "args": vars(args), "rows": rows, "runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
