"""A stand-in translation for markup tests: each segment's words reordered, with exact word links."""

from __future__ import annotations

import random
from typing import Any

from core.markup import render


def reordered(document: Any, order: str, seed: int = 0) -> str:
    """``document`` (from parse_html or parse_markdown) rendered back with every segment's words kept ("same"),
    reversed ("reverse") or shuffled ("shuffle", by ``seed``), each target word linked to its source word."""
    rng = random.Random(seed)
    out = []
    for part in document.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        segment = document.segments[part]
        words = segment.text.split()
        positions = list(range(len(words)))
        if order == "reverse":
            positions.reverse()
        elif order == "shuffle":
            rng.shuffle(positions)
        target = " ".join(words[i] for i in positions)
        out.append(render(segment, target, list(enumerate(positions))))
    return "".join(out)
