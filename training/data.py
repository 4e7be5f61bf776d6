"""Parallel text in, clean sentence pairs and token-count batches out."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

Pair = tuple[str, str]


class DataError(ValueError):
    """Malformed parallel text; the message names the file and line."""


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(
                    f"{path}:{number}: not valid UTF-8 (byte {err.start}): re-encode the file as UTF-8"
                ) from err
            yield number, text.rstrip("\r\n")


def read_tsv(path: str | Path) -> list[Pair]:
    """``source<TAB>target`` per line; any other column count is an error, not a skipped line."""
    path = Path(path)
    pairs = []
    for number, line in _lines(path):
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataError(f"{path}:{number}: expected 2 tab-separated columns (source, target), found {len(columns)}")
        pairs.append((columns[0], columns[1]))
    return pairs


def read_parallel(source: str | Path, target: str | Path) -> list[Pair]:
    """Two line-aligned plain-text files."""
    src = [line for _, line in _lines(Path(source))]
    tgt = [line for _, line in _lines(Path(target))]
    if len(src) != len(tgt):
        shorter, line = (source, len(src)) if len(src) < len(tgt) else (target, len(tgt))
        raise DataError(
            f"{source} has {len(src)} lines but {target} has {len(tgt)}: the files are not aligned "
            f"({shorter} ends after line {line})"
        )
    return list(zip(src, tgt, strict=True))


def read_pairs(path: str | Path, target: str | Path | None = None) -> list[Pair]:
    return read_parallel(path, target) if target else read_tsv(path)


@dataclass
class CleanReport:
    read: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, object]:
        return {"read": self.read, "kept": self.kept, "dropped": dict(self.dropped)}


def clean(pairs: list[Pair], max_words: int = 150, max_ratio: float = 3.0) -> tuple[list[Pair], CleanReport]:
    """Drop empty, identical, overlong, badly proportioned and duplicate pairs, counting each reason."""
    report = CleanReport(read=len(pairs))
    seen: set[Pair] = set()
    kept = []
    for src, tgt in pairs:
        src, tgt = " ".join(src.split()), " ".join(tgt.split())
        reason = None
        if not src or not tgt:
            reason = "empty"
        elif src == tgt and len(src.split()) > 1:
            reason = "identical"
        elif max(len(src.split()), len(tgt.split())) > max_words:
            reason = "too_long"
        elif max(len(src), len(tgt)) > max_ratio * min(len(src), len(tgt)) + 5:
            reason = "length_ratio"
        elif (src, tgt) in seen:
            reason = "duplicate"
        if reason:
            report.dropped[reason] += 1
            continue
        seen.add((src, tgt))
        kept.append((src, tgt))
    report.kept = len(kept)
    return kept, report


def split(pairs: list[Pair], dev_size: int, test_size: int, seed: int = 1) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """Random dev/test sets; training keeps no pair whose source occurs in them."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    dev = [pairs[i] for i in order[:dev_size]]
    test = [pairs[i] for i in order[dev_size : dev_size + test_size]]
    held = {s for s, _ in dev + test}
    train = [pairs[i] for i in order[dev_size + test_size :] if pairs[i][0] not in held]
    return train, dev, test


def write_tsv(pairs: list[Pair], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for src, tgt in pairs:
            out.write(f"{src.replace(chr(9), ' ')}\t{tgt.replace(chr(9), ' ')}\n")


def held_out(name: str) -> bool:
    """Whether a corpus file is a dev, test or reserved (``eval-``) set rather than training data."""
    return name == "dev.tsv" or name.startswith(("test.", "eval-"))


def reverse_corpus(corpus_dir: str | Path, out_dir: str | Path) -> dict[str, object]:
    """Write the corpus in ``corpus_dir`` the other way round (target<TAB>source) into ``out_dir``.

    Every ``*.tsv`` is swapped column for column. The forward corpus kept out of training every pair whose
    *source* side is held out; the reverse one also drops training pairs whose new source side (the old
    target) occurs in a dev, test or reserved set, so that no held-out source is seen in training either way.
    ``LICENSES.md`` is copied; ``report.json`` says where the corpus came from and what was dropped.
    """
    src, out = Path(corpus_dir), Path(out_dir)
    if src.resolve() == out.resolve():
        raise DataError(f"{out}: the reversed corpus needs a directory of its own")
    files = sorted(src.glob("*.tsv"))
    if not any(f.name == "train.tsv" for f in files):
        raise DataError(f"{src}: no train.tsv (build the corpus first: python -m training build-corpus)")
    tables = {f.name: [(tgt, source) for source, tgt in read_tsv(f)] for f in files}
    held = {source for name, pairs in tables.items() if held_out(name) for source, _ in pairs}
    train = tables["train.tsv"]
    for name in [n for n in tables if not held_out(n)]:  # train.tsv and any other training file (train+bt.tsv)
        tables[name] = [pair for pair in tables[name] if pair[0] not in held]
    for name, pairs in tables.items():
        write_tsv(pairs, out / name)
    if (src / "LICENSES.md").is_file():
        (out / "LICENSES.md").write_text((src / "LICENSES.md").read_text(encoding="utf-8"), encoding="utf-8")
    summary: dict[str, object] = {
        "reversed_from": str(src),
        "dropped_train_pairs_with_held_out_source": len(train) - len(tables["train.tsv"]),
        "pairs": {name: len(pairs) for name, pairs in tables.items()},
    }
    (out / "report.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def prepare(
    out_dir: str | Path,
    train: str | Path,
    target: str | Path | None = None,
    dev: str | Path | None = None,
    test: str | Path | None = None,
    dev_size: int = 1000,
    test_size: int = 1000,
    max_words: int = 150,
    max_ratio: float = 3.0,
    seed: int = 1,
) -> dict[str, object]:
    """Clean the corpus, split off dev/test unless given, write TSVs and report.json."""
    out = Path(out_dir)
    pairs, report = clean(read_pairs(train, target), max_words, max_ratio)
    given_dev = clean(read_pairs(dev), max_words, max_ratio)[0] if dev else None
    given_test = clean(read_pairs(test), max_words, max_ratio)[0] if test else None
    notes: list[str] = []
    if given_dev is None or given_test is None:
        wanted = (0 if given_dev else dev_size) + (0 if given_test else test_size)
        if wanted > 0.2 * len(pairs):  # a small corpus: held-out sets of a tenth each, not the whole corpus
            scaled = max(1, len(pairs) // 10)
            notes.append(
                f"{len(pairs)} clean pairs: dev and test take {scaled} each instead of {dev_size} and {test_size} "
                "(--dev-size/--test-size); give your own with --dev/--test"
            )
            dev_size, test_size = min(dev_size, scaled), min(test_size, scaled)
        rest, dev_pairs, test_pairs = split(pairs, 0 if given_dev else dev_size, 0 if given_test else test_size, seed)
        dev_pairs, test_pairs = given_dev or dev_pairs, given_test or test_pairs
    else:
        rest, dev_pairs, test_pairs = pairs, given_dev, given_test
    held = {s for s, _ in dev_pairs + test_pairs}
    train_pairs = [p for p in rest if p[0] not in held]
    dropped = ", ".join(f"{n} {why}" for why, n in report.dropped.items() if n)
    for name, part in (("training", train_pairs), ("dev", dev_pairs), ("test", test_pairs)):
        if not part:
            raise DataError(
                f"no {name} pairs would be left: {len(pairs)} of the input's pairs are clean"
                + (
                    f" (dropped: {dropped}; --max-words and --max-ratio, the longer side's words over the shorter "
                    "side's, decide)"
                    if dropped
                    else ""
                )
                + "; give more data, smaller --dev-size/--test-size, or your own --dev/--test"
            )
    report.dropped["in_dev_or_test"] += len(rest) - len(train_pairs)
    for name, part in (("train", train_pairs), ("dev", dev_pairs), ("test", test_pairs)):
        write_tsv(part, out / f"{name}.tsv")
    summary: dict[str, object] = {
        "clean": report.to_dict(),
        "train": len(train_pairs),
        "dev": len(dev_pairs),
        "test": len(test_pairs),
        **({"notes": notes} if notes else {}),
    }
    (out / "report.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


Example = tuple[list[int], list[int]]


def encode_pairs(tokenizer: object, pairs: list[Pair], max_source: int, max_target: int) -> tuple[list[Example], int]:
    """Token ids for each pair (no BOS/EOS yet); pairs over the piece limits are dropped and counted."""
    examples, too_long = [], 0
    for src, tgt in pairs:
        s = tokenizer.encode_source(src)  # type: ignore[attr-defined]
        t = tokenizer.encode_target(tgt)  # type: ignore[attr-defined]
        if not s or not t or len(s) + 1 > max_source or len(t) + 1 > max_target:
            too_long += 1
            continue
        examples.append((s, t))
    return examples, too_long


def padded_width(length: int, multiple: int) -> int:
    """``length`` rounded up to a multiple of ``multiple`` (1: unchanged)."""
    return -(-length // multiple) * multiple


def token_batches(
    examples: list[Example], batch_tokens: int, seed: int, epoch: int, pool: int = 100, multiple: int = 1
) -> list[list[int]]:
    """Index batches of at most ``batch_tokens`` padded tokens, grouping similar lengths.

    With ``multiple`` > 1 widths count as rounded up to that multiple (what ``collate`` pads to) and the
    examples of one rounded width are batched together, so most batches of a width have the same shape.
    Deterministic in (seed, epoch) so a resumed run sees the same batches in the same order.
    """
    rng = random.Random(seed * 100_003 + epoch)
    order = list(range(len(examples)))
    rng.shuffle(order)
    widths = [padded_width(max(len(src), len(tgt)) + 1, multiple) for src, tgt in examples]
    batches: list[list[int]] = []
    chunk = max(1, pool * max(1, batch_tokens // 32))
    for start in range(0, len(order), chunk):
        part = sorted(
            order[start : start + chunk],
            key=lambda i: (widths[i], len(examples[i][1]), len(examples[i][0])),
        )
        batch: list[int] = []
        width = 0
        for i in part:
            size = widths[i]
            if batch and max(width, size) * (len(batch) + 1) > batch_tokens:
                batches.append(batch)
                batch, width = [], 0
            batch.append(i)
            width = max(width, size)
        if batch:
            batches.append(batch)
    rng.shuffle(batches)
    return batches
