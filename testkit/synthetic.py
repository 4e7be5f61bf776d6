"""A synthetic translation task with real structure: the target is the source's words reversed,
each word spelled in capitals. Small enough to learn in a few hundred CPU steps."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = ["red", "blue", "green", "black", "white", "gold", "pink", "gray", "cyan", "teal", "navy", "plum"]


def make_pairs(n: int, seed: int, min_len: int = 2, max_len: int = 6) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((" ".join(words), " ".join(w.upper() for w in reversed(words))))
    return pairs


def write_corpus(directory: Path, train: int = 3000, dev: int = 100) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, n, seed in (("train", train, 1), ("dev", dev, 2)):
        path = directory / f"{name}.tsv"
        path.write_text("".join(f"{s}\t{t}\n" for s, t in make_pairs(n, seed)), encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]
