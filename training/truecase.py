"""The truecase table a bundle carries for text typed in capitals (core/casing.py): each word's usual case, counted
in the source side of the training text.

A word counts only where its case says something: not first in its line (capitalised there whatever it is), and not
in a line with no lower-case letter (a heading in capitals). Words whose usual case is lower case are left out, so
the table holds names, acronyms and (in German) nouns: 9,108 words for the en-de corpus, 38,382 for German.
``python -m training truecase`` adds one to a bundle; ``export`` writes one from the checkpoint's training file.
"""

from __future__ import annotations

import argparse
import collections
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from core.bundle import BundleError, read_manifest, write_manifest
from core.casing import TRUECASE_FILE, WORDS

MIN_COUNT = 2
"""Occurrences a word needs inside sentences before its usual case is trusted."""


def build_table(lines: Iterable[str], min_count: int = MIN_COUNT) -> dict[str, str]:
    """Lower-case word -> its most frequent form, for the words whose most frequent form is not lower case."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in lines:
        if not any(c.islower() for c in line):
            continue
        for i, match in enumerate(WORDS.finditer(line)):
            if i:
                word = match.group()
                counts[word.lower()][word] += 1
    table = {}
    for lower, forms in counts.items():
        (usual, seen), total = forms.most_common(1)[0], forms.total()
        if usual != lower and total >= min_count and seen * 2 > total:
            table[lower] = usual
    return dict(sorted(table.items()))


def source_lines(path: str | Path, column: int = 0) -> Iterable[str]:
    """One column of a TSV (0: source), or every line of a plain text file."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 1:
                yield parts[0]
            elif column < len(parts):
                yield parts[column]


def write_table(directory: Path, table: dict[str, str]) -> Path:
    path = directory / TRUECASE_FILE
    path.write_text(json.dumps(table, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    return path


def add_to_bundle(bundle: str | Path, text: str | Path, column: int = 0, min_count: int = MIN_COUNT) -> dict[str, Any]:
    """Build the table from ``text`` and write it into ``bundle``, its manifest re-written to name it."""
    bundle = Path(bundle)
    manifest = read_manifest(bundle)
    lines = tqdm(source_lines(text, column), desc=f"counting {Path(text).name}", unit=" lines", mininterval=2)
    table = build_table(lines, min_count)
    if not table:
        raise BundleError(f"{text}: no word with a usual case other than lower case; is it the source text?")
    write_table(bundle, table)
    manifest["vocabulary"] = {**manifest["vocabulary"], "truecase": TRUECASE_FILE}
    manifest["export"] = {**manifest["export"], "truecase": {"file": Path(text).name, "words": len(table)}}
    write_manifest(bundle, {key: value for key, value in manifest.items() if key != "files"})
    return {"bundle": str(bundle), "words": len(table), "from": str(text)}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "truecase",
        help="add a truecase table to a bundle, for text typed in capitals",
        description="Count each word's usual case in the source side of TEXT (a TSV, source first, or one sentence a "
        "line) and write it into BUNDLE as truecase.json, the manifest re-written. The engine then reads a sentence "
        "in capitals as if written in the usual case and gives its translation back in capitals (core/casing.py, "
        "docs/casing.md). `export` does this itself from the checkpoint's training file.",
    )
    p.add_argument("bundle", help="bundle directory")
    p.add_argument("text", help="the model's training text: a TSV (source column first) or plain text")
    p.add_argument("--column", type=int, default=0, help="TSV column holding the model's source language")
    p.add_argument("--min-count", type=int, default=MIN_COUNT, help="occurrences a word needs to be in the table")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    print(json.dumps(add_to_bundle(args.bundle, args.text, args.column, args.min_count), indent=2))
    return 0
