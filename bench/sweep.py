"""Short recipe sweep for the default model: train variants side by side for a fixed wall time, compare on dev.

Every variant starts from recipes/en-de-small.toml and changes a few settings; runs go two at a time (one
thread each) so a pair shares the machine equally, then each last checkpoint is scored on dev (loss on all of
dev, greedy BLEU/chrF on the first sentences). Prints a markdown table and writes JSON + markdown.

python -m bench sweep --minutes 7 --out docs/reports/sweep/report
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.loadtools import ROOT, report_dir, report_path, write_report
from bench.variants import RECIPE, run_all, slug, train_command

# name -> --set overrides on top of the recipe
VARIANTS: dict[str, list[str]] = {
    "post-ln lr0.8 w800": [],
    "pre-ln lr0.8 w400": ["model.pre_norm=true", "train.warmup_steps=400"],
    "post-ln lr0.8 w400": ["train.warmup_steps=400"],
    "pre-ln lr1.2 w400": ["model.pre_norm=true", "train.lr=1.2", "train.warmup_steps=400"],
    "pre-ln lr0.8 w400 16k": ["model.pre_norm=true", "train.warmup_steps=400", "data.vocab=runs/sweep/vocab16k"],
}


def job(name: str, root: Path, minutes: float, threads: int) -> tuple[list[str], Path, None]:
    run_dir = root / slug(name)
    sets = [
        f"train.max_minutes={minutes}",
        f"train.threads={threads}",
        "train.eval_every=100000000",
        "train.save_every=100000000",
        *VARIANTS[name],
    ]
    return train_command(run_dir, sets), run_dir / "sweep.log", None


def score(run_dir: Path, sentences: int, threads: int) -> dict[str, Any]:
    import torch

    from training.checkpoint import load_model
    from training.train import Trainer, evaluate_dev

    torch.set_num_threads(threads)
    model, cfg, _ = load_model(run_dir / "last.pt")
    cfg.data.dev_bleu_sentences = sentences
    trainer = Trainer(cfg, run_dir)
    trainer.load_data()
    state = torch.load(run_dir / "last.pt", map_location="cpu", weights_only=False)["train_state"]["position"]
    scores = evaluate_dev(model, cfg, trainer.dev, trainer.dev_refs, trainer.tokenizer, torch.device("cpu"))
    scores["steps"] = state["step"]
    scores["minutes"] = state["elapsed"] / 60
    tail = [h["train_nll"] for h in state["history"][-50:]]
    scores["train_nll_last50"] = sum(tail) / max(1, len(tail))
    scores["train_nll"] = [h["train_nll"] for h in state["history"]]  # type: ignore[assignment]
    return scores


def plot(results: dict[str, dict[str, Any]], path: Path, window: int = 20) -> bool:
    """Train nll (moving average over ``window`` steps) against steps, one line per variant."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, r in results.items():
        nll = r["train_nll"]
        smooth = [
            sum(nll[max(0, i - window + 1) : i + 1]) / len(nll[max(0, i - window + 1) : i + 1]) for i in range(len(nll))
        ]
        ax.plot(range(1, len(nll) + 1), smooth, label=f"{name} (dev loss {r['dev_loss']:.2f})")
    ax.set_xlabel("step")
    ax.set_ylabel(f"train nll, {window}-step mean")
    ax.set_ylim(top=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv: list[str] | None = None) -> int | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=7.0, help="wall-time budget per variant")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="threads per run")
    parser.add_argument("--sentences", type=int, default=100, help="dev sentences decoded for BLEU/chrF")
    parser.add_argument("--root", default="runs/sweep")
    parser.add_argument("--only", nargs="*", help="variant names to run (default: all)")
    parser.add_argument("--out", default=str(report_dir("sweep") / "report"), help="writes OUT.json and OUT.md")
    parser.add_argument("--report-only", action="store_true", help="rewrite OUT.md/OUT.png from OUT.json")
    parser.add_argument("--score-one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.score_one:
        print(json.dumps(score(Path(args.score_one), args.sentences, args.threads)))
        return
    if args.report_only:
        saved = json.loads(report_path(args.out, ".json").read_text())
        args.minutes = saved["minutes"]
        report(saved["results"], args)
        return
    root = Path(args.root)
    names = args.only or list(VARIANTS)
    print(f"training {len(names)} variants for {args.minutes} min each, {args.parallel} at a time ...", flush=True)
    started = time.monotonic()
    if any(run_all([job(n, root, args.minutes, args.threads) for n in names], args.parallel)):
        raise SystemExit(f"a sweep run failed: see {root}/*/sweep.log")
    print(f"  done in {(time.monotonic() - started) / 60:.1f} min", flush=True)
    results: dict[str, dict[str, Any]] = {}
    for i in range(0, len(names), args.parallel):
        group = names[i : i + args.parallel]
        procs = {
            n: subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench",
                    "sweep",
                    "--score-one",
                    str(root / slug(n)),
                    "--threads",
                    str(args.threads),
                ]
                + ["--sentences", str(args.sentences)],
                stdout=subprocess.PIPE,
                cwd=ROOT,
            )
            for n in group
        }
        for n, p in procs.items():
            stdout, _ = p.communicate()
            if p.returncode:
                raise SystemExit(f"scoring {n} failed")
            results[n] = json.loads(stdout.decode().strip().splitlines()[-1])
    report(results, args)


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    decoded = args.sentences > 0
    at = min(len(r["train_nll"]) for r in results.values()) // 10 * 10  # a step every variant reached
    lines = [
        f"Each variant trained {args.minutes:g} min wall time from `{RECIPE}`, {args.parallel} runs side by side, "
        f"{args.threads} thread(s) each; dev loss on all of dev"
        + (f", greedy BLEU/chrF on the first {args.sentences} dev sentences." if decoded else "."),
        "",
        f"| variant | steps in {args.minutes:g} min | train nll, steps {at - 19}-{at} | train nll, last 50 steps "
        "| dev loss |" + (" dev BLEU | dev chrF |" if decoded else ""),
        "|---|---:|---:|---:|---:|" + ("---:|---:|" if decoded else ""),
    ]
    for n, r in results.items():
        window = r["train_nll"][at - 20 : at]
        lines.append(
            f"| {n} | {int(r['steps'])} | {sum(window) / len(window):.3f} | {r['train_nll_last50']:.3f} "
            f"| {r['dev_loss']:.3f} |" + (f" {r['dev_bleu']:.2f} | {r['dev_chrf']:.2f} |" if decoded else "")
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if plot(results, report_path(out, ".png")):
        lines += ["", f"![train loss]({report_path(out, '.png').name})"]
    table = "\n".join(lines)
    print(table)
    write_report(out, table + "\n", {"minutes": args.minutes, "results": results})


if __name__ == "__main__":
    main()
