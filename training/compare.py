"""``python -m training compare-scores``: a retrained model against the one it would replace, and its ship rule.

Reads two score files written by ``evaluate-bundle --json`` (the same held-out sets, scored in one session by the
same code), prints a Markdown table of BLEU / chrF with the change per set, and checks the rule a retraining
wrote down before it started (docs/default-model.md): the mean BLEU of the reference sets may fall by at most
``--max-mean-drop``, and every ``--must-rise`` set must rise. Exit status 0 when the rule is met, 1 when not.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.corpus.commands import parse_source_list

# The five test sets the default models' means are taken over (README, docs/default-model.md).
FIVE_TESTS = (
    "test.software-ui.tsv",
    "test.libreoffice-help.tsv",
    "test.command-line.tsv",
    "test.manuals.tsv",
    "test.bible.tsv",
)
MAX_MEAN_DROP = 0.3


@dataclass(frozen=True)
class Verdict:
    old_mean: float
    new_mean: float
    fell: list[str]  # --must-rise sets that did not rise
    met: bool


def load_scores(path: str | Path) -> dict[str, dict[str, float]]:
    """``evaluate-bundle --json``'s file, keyed by the test file's name (a path's directories dropped)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    scores = {Path(name).name: value for name, value in data.items() if isinstance(value, dict) and "bleu" in value}
    if not scores:
        raise ValueError(f"{path}: no scores (expected the JSON of `evaluate-bundle --json`)")
    return scores


def _mean_bleu(scores: dict[str, dict[str, float]], sets: list[str]) -> float:
    return sum(scores[name]["bleu"] for name in sets) / len(sets)


def judge(
    old: dict[str, dict[str, float]],
    new: dict[str, dict[str, float]],
    mean_of: list[str],
    must_rise: list[str],
    max_mean_drop: float = MAX_MEAN_DROP,
) -> Verdict:
    missing = sorted({name for name in (*mean_of, *must_rise) if name not in old or name not in new})
    if missing:
        raise ValueError(f"sets the rule names are not scored in both files: {', '.join(missing)}")
    if not mean_of:
        raise ValueError("--mean-of names no set")
    old_mean, new_mean = _mean_bleu(old, mean_of), _mean_bleu(new, mean_of)
    fell = [name for name in must_rise if new[name]["bleu"] <= old[name]["bleu"]]
    # Compared at the hundredths the scores are written in, so that a drop of exactly the limit passes.
    met = round(old_mean - new_mean, 2) <= max_mean_drop and not fell
    return Verdict(old_mean, new_mean, fell, met)


def table(
    old: dict[str, dict[str, float]], new: dict[str, dict[str, float]], names: list[str], verdict: Verdict, means: int
) -> str:
    old_name, new_name = names
    rows = [f"| set | {old_name} | {new_name} | change |", "|---|---:|---:|---:|"]
    for name in [n for n in old if n in new]:
        a, b = old[name], new[name]
        rows.append(
            f"| {name} | {a['bleu']:.2f} / {a['chrf']:.2f} | {b['bleu']:.2f} / {b['chrf']:.2f} "
            f"| {b['bleu'] - a['bleu']:+.2f} |"
        )
    change = verdict.new_mean - verdict.old_mean
    rows.append(f"| mean BLEU of {means} | {verdict.old_mean:.2f} | {verdict.new_mean:.2f} | {change:+.2f} |")
    return "\n".join(rows)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare-scores",
        help="compare two bundles' evaluate-bundle scores and check a ship rule",
        description="Print OLD's and NEW's BLEU / chrF per held-out set (the JSON files of `evaluate-bundle "
        "--json`, scored in one session) with the change, and check the ship rule: the mean BLEU of the --mean-of "
        "sets falls by at most --max-mean-drop and every --must-rise set rises. Exit status 0: met; 1: not met.",
    )
    p.add_argument("old", help="scores of the bundle shipped before (evaluate-bundle --json)")
    p.add_argument("new", help="scores of the candidate")
    p.add_argument("--names", nargs=2, default=["old", "new"], metavar=("OLD", "NEW"), help="column headings")
    p.add_argument(
        "--mean-of",
        default=",".join(FIVE_TESTS),
        help="comma-separated test file names whose mean BLEU the rule guards",
    )
    p.add_argument("--max-mean-drop", type=float, default=MAX_MEAN_DROP, help="BLEU the mean may fall by")
    p.add_argument("--must-rise", default="", help="comma-separated test file names whose BLEU must rise")
    p.add_argument("--out", help="also write the table and the verdict to this Markdown file")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    old, new = load_scores(args.old), load_scores(args.new)
    mean_of, must_rise = parse_source_list(args.mean_of), parse_source_list(args.must_rise)
    verdict = judge(old, new, mean_of, must_rise, args.max_mean_drop)
    lines = [
        table(old, new, args.names, verdict, len(mean_of)),
        "",
        f"Rule: the mean BLEU of {len(mean_of)} sets falls by at most {args.max_mean_drop:g} "
        f"({verdict.old_mean:.2f} → {verdict.new_mean:.2f}, {verdict.new_mean - verdict.old_mean:+.2f})"
        + (f" and {', '.join(must_rise)} {'rises' if len(must_rise) == 1 else 'rise'}" if must_rise else "")
        + (f"; did not rise: {', '.join(verdict.fell)}" if verdict.fell else "")
        + f". {'Met' if verdict.met else 'Not met'}.",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0 if verdict.met else 1
