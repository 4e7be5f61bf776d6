"""Which of the static path's own graphs (``place``, ``grow``, ``compact``) a pass of translations runs, and which
buckets it opens, on the CPU with the capture flags a GPU sets (the admissions then take CUDA's paths).

    PYTHONPATH=TREE python bench/gpu_session/graph_calls.py BUNDLE INPUT BATCH [--sentences N] [--columns-slack N]
    PYTHONPATH=TREE python bench/gpu_session/graph_calls.py BUNDLE INPUT 1 --reach [--sentences N]

Translates INPUT's first N sentences (default 40, what ``static_host.py`` takes at batch 1) in batches of BATCH,
beam 4, with the bundle's GPU set, and prints each graph's calls, the bucket moves ``grow`` made (axis: from, to),
the buckets opened, and the steps by bucket (slots, cache columns) and by the sentences they ran.
``--columns-slack`` sets ``static_state.COLUMNS_SLACK`` (-1000: a new set starts at the fewest cache columns, as
before session 42). On an H100 in session 42 a batch-1 sentence spent 1.8 ms in these
graphs (``static_host.py``); this says which calls those were. ``--reach`` instead translates each sentence alone
with the bundle's main graphs and prints how far past its source's length its hypotheses ran (the cache columns its
set needed), and what a new set's first columns of ``source + slack`` would do for a few slacks: how many sentences
would still grow, and how many would start in a larger bucket than they reach. Figures in docs/inference-core.md,
session 42.
"""

from __future__ import annotations

import argparse
import collections
import sys
from typing import Any

from core.translation import DecodeOptions
from inference import static_state
from inference.engine import Engine
from testkit.running import graph_runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle")
    parser.add_argument("input")
    parser.add_argument("batch", type=int)
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--columns-slack", type=int)
    parser.add_argument("--reach", action="store_true", help="how far each sentence's hypotheses run, alone")
    args = parser.parse_args(argv)
    if args.columns_slack is not None:
        static_state.COLUMNS_SLACK = args.columns_slack
    with open(args.input, encoding="utf-8") as lines:
        texts = [line.split("\t")[0] for line in lines if line.strip()][: args.sentences]
    if args.reach:
        return reach(args.bundle, texts)
    engine = Engine.load(args.bundle, provider="cpu", graphs="cuda", static_step=True, threads=2)
    engine.cuda_graph = engine.static_encoder = True  # what Engine.load sets on CUDA for a padded encoder
    roles = graph_runs(engine)
    moves: collections.Counter[str] = collections.Counter()
    grow = static_state.StaticState._grow

    def recorded(self: static_state.StaticState, old: static_state.Buffers, new: static_state.Buffers) -> None:
        a, b = old.dims, new.dims
        for axis in ("slots", "hyps", "width", "columns"):
            if getattr(a, axis) != getattr(b, axis):
                moves[f"{axis} {getattr(a, axis)}->{getattr(b, axis)}"] += 1
        grow(self, old, new)

    steps: collections.Counter[tuple[int, int]] = collections.Counter()  # (slots, columns) of each step's bucket
    alive: collections.Counter[str] = collections.Counter()  # steps by the sentences running in them
    step = static_state.StaticState.step

    def counted(self: static_state.StaticState, tokens: Any, *rest: Any, **kwargs: Any) -> Any:
        out = step(self, tokens, *rest, **kwargs)
        assert self.buffers is not None
        steps[(self.buffers.dims.slots, self.buffers.dims.columns)] += 1
        n = len(tokens)
        alive["1-7" if n < 8 else "8-31" if n < 32 else "32-127" if n < 128 else "128+"] += 1
        return out

    static_state.StaticState._grow = recorded  # type: ignore[method-assign]
    static_state.StaticState.step = counted  # type: ignore[method-assign]
    options = DecodeOptions(beam_size=4)
    try:
        for start in range(0, len(texts), args.batch):
            engine.translate(texts[start : start + args.batch], options)
    finally:
        static_state.StaticState._grow = grow  # type: ignore[method-assign]
        static_state.StaticState.step = step  # type: ignore[method-assign]
    opened = sorted(tuple(vars(d).values()) for d in engine.static_pool.opened)
    print(f"COLUMNS_SLACK {static_state.COLUMNS_SLACK}, {len(texts)} sentences in batches of {args.batch}")
    print(f"graph calls: {dict(collections.Counter(roles)) or 'none'}; grow moves: {dict(moves) or 'none'}")
    print(f"buckets opened (slots, hyps, width, columns): {opened}")
    print(f"steps {sum(steps.values())} by bucket (slots, columns): {dict(sorted(steps.items()))}")
    print(f"steps by sentences running: {dict(alive)}")
    return 0


def reach(bundle: str, texts: list[str]) -> int:
    """Each sentence alone: its source pieces and the cache columns its hypotheses reached; then per slack, the
    sentences a set starting at ``bucket(source + slack)`` columns would still grow, and those it over-sizes."""
    from inference.engine import DeviceState

    engine = Engine.load(bundle, provider="cpu", threads=2)
    reached = [0]
    step = DeviceState.step

    def recorded(self: DeviceState, tokens: Any, positions: Any, *args: Any, **kwargs: Any) -> Any:
        reached[0] = max(reached[0], int(positions.max()) + 1)
        return step(self, tokens, positions, *args, **kwargs)

    DeviceState.step = recorded  # type: ignore[method-assign]
    seen = []
    try:
        for text in texts:
            reached[0] = 0
            engine.translate([text], DecodeOptions(beam_size=4))
            seen.append((len(engine.tokenize(text)), reached[0]))
    finally:
        DeviceState.step = step  # type: ignore[method-assign]
    past = sum(columns - pieces for pieces, columns in seen) / len(seen)
    least = static_state.MIN_COLUMNS
    print(f"{len(seen)} sentences alone: hypotheses ran {past:.1f} positions past the source on average")
    for slack in (-1000, 0, 4, 8, 16):
        first = [static_state.bucket(pieces + slack, least) for pieces, _ in seen]
        needed = [static_state.bucket(columns, least) for _, columns in seen]
        grows = sum(n > f for f, n in zip(first, needed, strict=True))
        larger = sum(f > n for f, n in zip(first, needed, strict=True))
        print(f"slack {slack}: {grows} would grow, {larger} start in a larger bucket than they reach")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
