"""Writing: the TSV files, ``report.json``, ``report.md`` and ``LICENSES.md``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from training.corpus.aligners import BIBLE_PAIRINGS, BIBLE_VERSION_NAMES
from training.corpus.collect import SourceData
from training.corpus.sources import Pair
from training.corpus.split import GROUP_TRAIN_FILES, SEPARATE_TEST_GROUPS, TEST_GROUPS, CorpusSplits, group_of

EVAL_SETS = {"gnome-user-docs": "eval-gnome-user-docs.tsv", "bible-acts": "eval-bible-acts.tsv"}
CLEANING_REASONS = ("empty", "placeholder-only", "identical", "too-long", "length-ratio")
SPLIT_REASONS = (
    "duplicate",
    "heldout-overlap",
    "heldout-common",
    "heldout-duplicate",
    "secondary-version",
)


def tsv_field(text: str) -> str:
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def write_tsv(path: Path, pairs: Iterable[Pair]) -> int:
    """Write ``english<TAB>german`` lines; returns the number of lines."""
    n = 0
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for pair in pairs:
            out.write(f"{tsv_field(pair.en)}\t{tsv_field(pair.de)}\n")
            n += 1
    return n


def remove_previous_outputs(out_dir: Path) -> None:
    """Delete files a previous build wrote, so no stale test/eval file survives."""
    for pattern in (
        "train.tsv",
        "train.*.tsv",
        "dev.tsv",
        "test.tsv",
        "test.*.tsv",
        "eval-*.tsv",
        "report.*",
        "LICENSES.md",
    ):
        for path in out_dir.glob(pattern):
            path.unlink()


def write_splits(out_dir: Path, splits: CorpusSplits) -> dict[str, int]:
    """Write every split file; returns file name -> pair count."""
    sizes = {"train.tsv": write_tsv(out_dir / "train.tsv", splits.train)}
    by_group: dict[str, list[Pair]] = {}
    for pair in splits.train:  # one pass; the same pairs as in train.tsv, in its order: for data.extra
        if (group := group_of(pair)) in GROUP_TRAIN_FILES:
            by_group.setdefault(group, []).append(pair)
    for group, in_group in sorted(by_group.items()):
        sizes[f"train.{group}.tsv"] = write_tsv(out_dir / f"train.{group}.tsv", in_group)
    sizes["dev.tsv"] = write_tsv(out_dir / "dev.tsv", splits.dev)
    test_all = [p for group in TEST_GROUPS if group not in SEPARATE_TEST_GROUPS for p in splits.test.get(group, [])]
    sizes["test.tsv"] = write_tsv(out_dir / "test.tsv", test_all)
    for group in TEST_GROUPS:
        if splits.test.get(group):
            sizes[f"test.{group}.tsv"] = write_tsv(out_dir / f"test.{group}.tsv", splits.test[group])
    for name, file_name in EVAL_SETS.items():
        if name in splits.eval:
            sizes[file_name] = write_tsv(out_dir / file_name, splits.eval[name])
    return sizes


def build_report(
    splits: CorpusSplits,
    collected: dict[str, SourceData],
    file_sizes: dict[str, int],
    seed: int,
    seconds: dict[str, float],
) -> dict[str, Any]:
    """The machine-readable report (also rendered into report.md)."""
    per_source: dict[str, Any] = {}
    for name, data in collected.items():
        stats = splits.stats.get(name, Counter())
        dropped = {r: stats[f"dropped:{r}"] for r in (*CLEANING_REASONS, *SPLIT_REASONS) if stats[f"dropped:{r}"]}
        per_source[name] = {
            "group": data.spec.group,
            "description": data.spec.description,
            "packages": data.package_files,
            "extracted": stats["extracted"],
            "kept_after_cleaning": stats["extracted"] - sum(stats[f"dropped:{r}"] for r in CLEANING_REASONS),
            "train": stats["train"],
            "dev": stats["dev"],
            "test": stats["test"],
            "eval": stats["eval"],
            "dropped": dropped,
            "notes": data.notes,
        }
    return {
        "seed": seed,
        "sources": list(collected),
        "bible_pairings": [f"{BIBLE_VERSION_NAMES[e]} -> {BIBLE_VERSION_NAMES[g]}" for e, g in BIBLE_PAIRINGS],
        "splits": file_sizes,
        "per_source": per_source,
        "heldout_units": splits.heldout_units,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }


def _md_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def render_report_md(report: dict[str, Any]) -> str:
    """Human-readable version of the report."""
    per_source: dict[str, Any] = report["per_source"]
    lines = ["# English-German corpus report", ""]
    lines += [f"Seed {report['seed']}; built in {report['seconds'].get('total', 0):.0f} s.", ""]
    lines += ["## Split sizes", ""]
    lines += _md_table(["file", "pairs"], report["splits"].items())
    lines += ["", "## Pairs per source", ""]
    cols = ["extracted", "kept_after_cleaning", "train", "dev", "test", "eval"]
    rows = [[name, s["group"], *(s[c] for c in cols)] for name, s in per_source.items()]
    totals = [sum(s[c] for s in per_source.values()) for c in cols]
    rows.append(["**total**", "", *totals])
    lines += _md_table(
        ["source", "group", "extracted", "kept after cleaning", "train", "dev", "test", "eval"],
        rows,
    )
    lines += ["", "## Dropped pairs per source and reason", ""]
    reasons = [*CLEANING_REASONS, *SPLIT_REASONS]
    rows = [[name, *(s["dropped"].get(r, 0) for r in reasons)] for name, s in per_source.items()]
    rows.append(["**total**", *(sum(s["dropped"].get(r, 0) for s in per_source.values()) for r in reasons)])
    lines += _md_table(["source", *reasons], rows)
    lines += [
        "",
        "Reasons: *empty* (either side empty, incl. untranslated entries), *identical* "
        "(same text both sides, case-insensitive), *placeholder-only* (no letters besides "
        "placeholders/punctuation), *too-long* (> 150 words), *length-ratio* (character "
        "lengths differ > 3x, with +10 slack), *duplicate* (exact pair already in train), "
        "*heldout-overlap* (train pair whose English side occurs in dev/test/eval), "
        "*heldout-common* (dev/test pair whose English side occurs in 3+ training units: it "
        "stays in training and leaves the held-out set), "
        "*heldout-duplicate* (repeated English side inside dev/test/eval), "
        "*secondary-version* (non-primary Bible version pairing of a held-out book).",
        "",
        "Bible pairings: " + "; ".join(report["bible_pairings"]) + " (held-out sets: the first only).",
        "",
        "## Held-out units",
        "",
    ]
    for split_name, groups in report["heldout_units"].items():
        for group, units in groups.items():
            lines.append(f"- **{split_name} / {group}** ({len(units)} units): " + ", ".join(units))
    notes = [(name, note) for name, s in per_source.items() for note in s["notes"]]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {name}: {note}" for name, note in notes]
    lines += ["", "## Time (s)", ""]
    lines += _md_table(["step", "seconds"], report["seconds"].items())
    return "\n".join(lines) + "\n"


def render_licenses_md(collected: dict[str, SourceData]) -> str:
    """LICENSES.md: license per source and the package files the data was derived from."""
    lines = [
        "# Licenses of the corpus data",
        "",
        "Each TSV line is derived from the packages listed below and keeps the license of its",
        "source. Catalog and help translations are GPL/LGPL/MPL/AGPL/BSD-style licensed (see",
        "each package's `usr/share/doc/<package>/copyright` or wheel metadata); the Bible",
        "versions used are in the public domain. `gnome-user-docs` (CC-BY-SA-3.0) is used",
        "only for the reserved evaluation set `eval-gnome-user-docs.tsv`.",
        "",
    ]
    rows = [
        [
            name,
            "; ".join(data.licenses) or "see package",
            ", ".join(f"`{f}`" for f in data.package_files),
        ]
        for name, data in collected.items()
    ]
    lines += _md_table(["source", "license", "package files"], rows)
    return "\n".join(lines) + "\n"
