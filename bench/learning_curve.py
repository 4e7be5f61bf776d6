"""Plot dev BLEU/chrF against training time from a run's evals.jsonl; writes a PNG and a markdown table.

python bench/learning_curve.py runs/en-de --out docs/default-model-curve.png [--previous OLD/evals.jsonl]

``--previous`` draws an earlier run's dev chrF (dashed) on the same time axis.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", default="docs/default-model-curve.png")
    parser.add_argument("--previous", type=Path, help="an earlier run's evals.jsonl, drawn dashed")
    parser.add_argument("--previous-label", default="previous run")
    args = parser.parse_args()
    evals = _read(Path(args.run_dir) / "evals.jsonl")
    if not evals:
        raise SystemExit(f"{args.run_dir}/evals.jsonl holds no evaluation yet")
    print("| step | minutes | dev loss | dev BLEU | dev chrF |")
    print("|---:|---:|---:|---:|---:|")
    for e in evals:
        print(f"| {e['step']} | {e['minutes']:.1f} | {e['dev_loss']:.3f} | {e['dev_bleu']:.2f} | {e['dev_chrf']:.2f} |")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    minutes = [e["minutes"] for e in evals]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(minutes, [e["dev_bleu"] for e in evals], marker="o", label="dev BLEU")
    ax.plot(minutes, [e["dev_chrf"] for e in evals], marker="s", label="dev chrF")
    if args.previous:
        previous = _read(args.previous)
        ax.plot(
            [e["minutes"] for e in previous],
            [e["dev_chrf"] for e in previous],
            linestyle="--",
            color="gray",
            label=f"dev chrF, {args.previous_label}",
        )
    ax.set_xlabel("training minutes (2 CPU cores)")
    ax.set_ylabel("score")
    ax.set_title(f"Learning curve: {Path(args.run_dir).name}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


def _read(path: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


if __name__ == "__main__":
    main()
