"""Summarize py-spy's raw stacks (``py-spy record --format raw``): each thread's share of the samples and the
frames that hold most of them, inclusive (a frame counts every sample it is on the stack of).

    python bench/gpu_session/stacks.py STACKS.txt... [--top 40] [--under FRAME]

``--under`` counts only the samples whose stack holds a frame starting with FRAME, and lists the frames called
from it (e.g. ``--under "Scheduler._work"``: where a running set's worker spends its time). Several files are
summed; ``stack_dump/sitecustomize.py`` writes the same form where py-spy cannot attach.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path


def read(path: Path) -> list[tuple[list[str], int]]:
    samples = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        stack, _, count = line.rpartition(" ")
        samples.append((stack.split(";"), int(count)))
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stacks", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--under", help="only stacks through a frame that starts with this")
    args = parser.parse_args(argv)
    samples = [sample for path in args.stacks for sample in read(path)]
    total = sum(count for _, count in samples)
    threads: collections.Counter[str] = collections.Counter()
    frames: collections.Counter[str] = collections.Counter()
    for stack, count in samples:
        threads[stack[0]] += count
        if args.under:
            at = next((i for i, frame in enumerate(stack) if frame.startswith(args.under)), None)
            if at is None:
                continue
            stack = stack[at:]
        for frame in set(stack):
            frames[frame] += count
    print(f"{total} samples")
    for thread, count in threads.most_common(8):
        print(f"{100 * count / total:5.1f} %  thread from {thread}")
    print()
    for frame, count in frames.most_common(args.top):
        print(f"{100 * count / total:5.1f} %  {frame}")


if __name__ == "__main__":
    main()
