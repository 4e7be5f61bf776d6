"""Plot dev BLEU/chrF against training time from a run's evals.jsonl; writes a PNG and a markdown table.

python -m bench learning-curve runs/en-de --out docs/reports/default-model/curve.png [--previous OLD/evals.jsonl]

``--previous`` draws an earlier run's dev chrF (dashed) on the same time axis. ``--continues`` says the run
started from another run's weights (``train.init``): that run is drawn first and this one after it, on one axis
of total training minutes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.loadtools import report_dir


def main(argv: list[str] | None = None) -> int | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", default=str(report_dir("default-model") / "curve.png"))
    parser.add_argument("--previous", type=Path, help="an earlier run's evals.jsonl, drawn dashed")
    parser.add_argument("--previous-label", default="previous run")
    parser.add_argument("--continues", type=Path, help="evals.jsonl of the run this one was initialized from")
    args = parser.parse_args(argv)
    evals = _read(Path(args.run_dir) / "evals.jsonl")
    if not evals:
        raise SystemExit(f"{args.run_dir}/evals.jsonl holds no evaluation yet")
    before = _read(args.continues) if args.continues else []
    offset = max((e["minutes"] for e in before), default=0.0)
    print("| step | minutes | dev loss | dev BLEU | dev chrF |" + (" total minutes |" if before else ""))
    print("|---:|---:|---:|---:|---:|" + ("---:|" if before else ""))
    for e in evals:
        total = f" {e['minutes'] + offset:.1f} |" if before else ""
        print(
            f"| {e['step']} | {e['minutes']:.1f} | {e['dev_loss']:.3f} | {e['dev_bleu']:.2f} | {e['dev_chrf']:.2f} |"
            + total
        )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    minutes = [e["minutes"] + offset for e in evals]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if before:
        first = [e["minutes"] for e in before]
        ax.plot(first, [e["dev_bleu"] for e in before], marker="o", color="tab:blue", alpha=0.4, label="_")
        ax.plot(first, [e["dev_chrf"] for e in before], marker="s", color="tab:orange", alpha=0.4, label="_")
        ax.axvline(offset, color="gray", linewidth=0.8)
        ax.annotate(" continued", (offset, 0), xycoords=("data", "axes fraction"), va="bottom", fontsize=8)
    ax.plot(minutes, [e["dev_bleu"] for e in evals], marker="o", color="tab:blue", label="dev BLEU")
    ax.plot(minutes, [e["dev_chrf"] for e in evals], marker="s", color="tab:orange", label="dev chrF")
    if args.previous:
        previous = _read(args.previous)
        ax.plot(
            [e["minutes"] for e in previous],
            [e["dev_chrf"] for e in previous],
            linestyle="--",
            color="gray",
            label=f"dev chrF, {args.previous_label}",
        )
    ax.set_xlabel("training minutes (2 CPU cores)" + (", both runs" if before else ""))
    ax.set_ylabel("score")
    ax.set_title(f"Learning curve: {Path(args.run_dir).name}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


def _read(path: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


if __name__ == "__main__":
    main()
