"""Model-size sweep at equal 2-core CPU budget, trained fast on a GPU.

The recipe's budget is wall time on 2 CPU cores (recipes/en-de-small.toml: 120 minutes). A bigger model
takes fewer steps in that time. Steps are the same arithmetic on a GPU, so each variant can be trained on a
GPU for as many steps as it would get on the CPU, and compared there on dev, in minutes instead of hours:

    # 1. the CPU cost of a step, per variant (2 threads each; --parallel runs pin disjoint core pairs)
    python -m bench size-sweep cpu-cost --steps 60 --parallel 5
    # 2. train every variant on the GPU, dev evaluation every --eval-every steps (all at once)
    python -m bench size-sweep train --minutes 7 --eval-every 250
    # 3. the table: each variant's dev scores at the step it reaches in the budget on the 2-core CPU, from the
    #    baseline's measured steps in that budget (--base-steps) and the cost ratios of step 1
    python -m bench size-sweep report --base-steps 6500 --out docs/reports/size-sweep/report

Step costs (1) are ratios to the baseline measured side by side, so they carry over to another CPU better
than absolute times; --base-steps is what the baseline really reached on the target machine. The learning
rate schedule (inverse square root) does not depend on the planned length, so a variant's state at step S is
the same whether it trains on for longer or stops there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
from pathlib import Path
from typing import Any

from bench.loadtools import report_dir, report_path
from bench.variants import run_all, slug, train_command

VARIANTS: dict[str, list[str]] = {
    "d256 3+3": [],
    "d256 6+6": ["model.encoder_layers=6", "model.decoder_layers=6"],
    "d256 6+2": ["model.encoder_layers=6", "model.decoder_layers=2"],
    "d384 3+3": ["model.d_model=384", "model.n_heads=6", "model.d_ff=1536"],
    "d512 3+3": ["model.d_model=512", "model.n_heads=8", "model.d_ff=2048"],
}
BASELINE = "d256 3+3"
RATE = re.compile(r"step (\d+) .* (\d+) tgt tok/s")


def cpu_cost(args: argparse.Namespace) -> None:
    root = Path(args.root) / "cpu"
    jobs = []
    for i, name in enumerate(VARIANTS):
        sets = [f"train.max_steps={args.steps}", "train.threads=2", "train.log_every=10"]
        sets += ["train.eval_every=100000000", "train.save_every=100000000"]
        cmd = train_command(root / slug(name), [*args.set, *VARIANTS[name], *sets])
        if args.parallel > 1:
            cores = f"{2 * i % (os.cpu_count() or 2)},{(2 * i + 1) % (os.cpu_count() or 2)}"
            cmd = ["taskset", "-c", cores, *cmd]
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        jobs.append((cmd, root / slug(name) / "sweep.log", env))
    run_all(jobs, args.parallel)
    costs: dict[str, Any] = {}
    for name in VARIANTS:
        text = (root / slug(name) / "sweep.log").read_text(encoding="utf-8", errors="replace")
        rates = [float(m.group(2)) for m in RATE.finditer(text) if int(m.group(1)) > 10]  # first window: warm-up
        if not rates:
            raise SystemExit(f"{name}: no throughput lines in {root / slug(name) / 'sweep.log'}")
        costs[name] = {"tok_s": statistics.median(rates), "windows": rates}
    base = costs[BASELINE]["tok_s"]
    for name, c in costs.items():
        c["step_cost_vs_base"] = base / c["tok_s"]
        print(f"{name:>10}: {c['tok_s']:7.0f} tgt tok/s on 2 threads, step cost x{c['step_cost_vs_base']:.2f}")
    (Path(args.root) / "cpu-cost.json").write_text(json.dumps(costs, indent=2) + "\n", encoding="utf-8")


def train(args: argparse.Namespace) -> None:
    root = Path(args.root) / "gpu"
    jobs = []
    for name in VARIANTS:
        sets = [f"train.max_minutes={args.minutes}", f"train.eval_every={args.eval_every}", "train.amp=false"]
        sets += ["train.save_every=100000000", "train.threads=2", "train.log_every=250"]
        jobs.append(
            (
                train_command(root / slug(name), [*args.set, *VARIANTS[name], *sets]),
                root / slug(name) / "sweep.log",
                dict(os.environ),
            )
        )
    run_all(jobs, len(jobs))


def _at(evals: list[dict[str, Any]], step: float, key: str) -> float | None:
    """``key`` at ``step``, linear between the two evaluations around it; None past the last one."""
    points = [(0, None)] + [(e["step"], e[key]) for e in evals]
    for (s0, v0), (s1, v1) in zip(points, points[1:], strict=False):
        if s0 <= step <= s1:
            if v0 is None:
                return v1 if step == s1 else None
            return v0 + (v1 - v0) * (step - s0) / (s1 - s0)
    return None


def report(args: argparse.Namespace) -> None:
    costs = json.loads((Path(args.root) / "cpu-cost.json").read_text(encoding="utf-8"))
    rows = []
    for name in VARIANTS:
        run = Path(args.root) / "gpu" / slug(name)
        evals = [json.loads(line) for line in (run / "evals.jsonl").read_text(encoding="utf-8").splitlines()]
        steps = args.base_steps / costs[name]["step_cost_vs_base"]
        row: dict[str, Any] = {"variant": name, "step_cost": costs[name]["step_cost_vs_base"], "steps": round(steps)}
        row["last_step_trained"] = evals[-1]["step"] if evals else 0
        for key in ("dev_loss", "dev_bleu", "dev_chrf"):
            row[key] = _at(evals, steps, key)
        rows.append(row)
    out = Path(args.out)
    curves = {
        name: [json.loads(line) for line in (Path(args.root) / "gpu" / slug(name) / "evals.jsonl").open()]
        for name in VARIANTS
    }
    record = {"base_steps": args.base_steps, "rows": rows, "cpu_cost": costs, "dev_curves": curves}
    report_path(out, ".json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    lines = [
        "| variant | CPU step cost | steps in the budget | dev loss | dev BLEU | dev chrF |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:

        def f(v: float | None, digits: int = 2) -> str:
            return "n/a" if v is None else f"{v:.{digits}f}"

        lines.append(
            f"| {r['variant']} | x{r['step_cost']:.2f} | {r['steps']:,} | {f(r['dev_loss'], 3)} | "
            f"{f(r['dev_bleu'])} | {f(r['dev_chrf'])} |"
        )
    budget = args.budget_minutes
    marks = [budget * f for f in (0.25, 0.5, 0.75, 1.0)]
    lines += [
        "",
        f"Dev chrF at equal 2-core CPU time (minutes of the {budget:g}-minute budget; n/a: past the GPU run):",
        "",
        "| variant | " + " | ".join(f"{m:g} min" for m in marks) + " |",
        "|---|" + "---:|" * len(marks),
    ]
    for name in VARIANTS:
        run = Path(args.root) / "gpu" / slug(name)
        evals = [json.loads(line) for line in (run / "evals.jsonl").read_text(encoding="utf-8").splitlines()]
        cost = costs[name]["step_cost_vs_base"]
        cells = []
        for m in marks:
            steps = args.base_steps * m / budget / cost
            value = _at(evals, steps, "dev_chrf")
            cells.append("n/a" if value is None else f"{value:.1f} (step {steps:,.0f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    report_path(out, ".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    plot(args, costs, report_path(out, ".png"))


def plot(args: argparse.Namespace, costs: dict[str, Any], path: Path) -> None:
    """Dev loss and chrF against 2-core CPU minutes (steps x cost / the baseline's steps per minute)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    per_minute = args.base_steps / args.budget_minutes
    fig, (loss_ax, chrf_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for name in VARIANTS:
        lines = (Path(args.root) / "gpu" / slug(name) / "evals.jsonl").read_text(encoding="utf-8").splitlines()
        evals = [json.loads(line) for line in lines]
        minutes = [e["step"] * costs[name]["step_cost_vs_base"] / per_minute for e in evals]
        loss_ax.plot(minutes, [e["dev_loss"] for e in evals], label=name)
        chrf_ax.plot(minutes, [e["dev_chrf"] for e in evals], label=name)
    for ax, label in ((loss_ax, "dev loss (nats/token)"), (chrf_ax, "dev chrF (greedy, 150 sentences)")):
        ax.axvline(args.budget_minutes, color="grey", linestyle=":")
        ax.set_xlabel("minutes of 2-core CPU time (equivalent)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    chrf_ax.legend()
    fig.suptitle("Model size at equal CPU budget (16k vocabulary; trained on a GPU at CPU-equivalent steps)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("cpu-cost", "train", "report"):
        p = sub.add_parser(name)
        p.add_argument("--root", default="runs/size-sweep")
        p.add_argument("--set", action="append", default=[], help="extra overrides for every variant")
    sub.choices["cpu-cost"].add_argument("--steps", type=int, default=60)
    sub.choices["cpu-cost"].add_argument("--parallel", type=int, default=1)
    sub.choices["train"].add_argument("--minutes", type=float, default=7.0)
    sub.choices["train"].add_argument("--eval-every", type=int, default=250)
    sub.choices["report"].add_argument("--base-steps", type=float, required=True)
    sub.choices["report"].add_argument("--budget-minutes", type=float, default=120.0)
    sub.choices["report"].add_argument("--out", default=str(report_dir("size-sweep") / "report"))
    args = parser.parse_args(argv)
    {"cpu-cost": cpu_cost, "train": train, "report": report}[args.what](args)


if __name__ == "__main__":
    main()
