"""Two engine versions side by side: each a code tree and a bundle, the same sentences, alternated runs.

    python -m bench engine-ab --a OLD_TREE:OLD_BUNDLE --b .:models/en-de [--input data/en-de/test.tsv]
        [--sentences 256] [--batch-sizes 1,32] [--beams 4] [--repeats 3] [--threads 2] [--server-options]
        [--out docs/reports/engine-ab/report]

What a change to the engine costs or gains: ``OLD_TREE`` is a checkout of the commit before (``git worktree
add /tmp/old HEAD~1``), with a bundle that tree reads. Each side runs in its own worker process (its tree
first on ``sys.path``), both stay loaded, and the runs alternate a b a b ... ``--repeats`` times per
configuration, so the two share the machine's state; figures are medians of target tokens/s (generated pieces,
EOS not counted), their ratio b/a, and the share of best outputs that are identical. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench.loadtools import ROOT, SERVER_SEARCH, Worker, add_server_options, machine, report_dir, write_report

WORKER = """
import json, os, sys, time
tree, bundle, threads, static_step = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
sys.path.insert(0, tree)
if os.path.isdir(os.path.join(tree, "inference")):
    from inference.engine import Engine
    from core.translation import DecodeOptions
else:  # trees from before the core/inference split
    from service.engine import Engine
    from service.translation import DecodeOptions
assert Engine.load.__code__.co_filename.startswith(tree), "imported another tree's engine"
engine = Engine.load(bundle, provider="cpu", threads=threads, **({"static_step": True} if static_step else {}))
engine.warmup()
print(json.dumps({"ready": engine.manifest["name"] + " " + engine.manifest["version"]}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    sources = [engine.tokenize(t) for t in job["texts"]]
    options = DecodeOptions(beam_size=job["beam"], max_length=job["max_length"], **job["options"])
    outputs, started = [], time.perf_counter()
    for lo in range(0, len(sources), job["batch"]):
        outputs += [t.best.token_ids for t in engine.translate_ids(sources[lo : lo + job["batch"]], options)]
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "outputs": outputs}), flush=True)
"""


class Side(Worker):
    def __init__(self, spec: str, threads: int, static_step: bool = False):
        tree, _, bundle = spec.partition(":")
        if not bundle:
            raise SystemExit(f"--a/--b take TREE:BUNDLE, got {spec!r}")
        args = [str(Path(tree).resolve()), str(Path(tree, bundle).resolve()), str(threads), str(int(static_step))]
        super().__init__(WORKER, args, spec)
        self.model = self.ready["ready"]

    def run(self, texts: list[str], beam: int, batch: int, max_length: int, options: dict[str, Any]) -> dict[str, Any]:
        job = {"texts": texts, "beam": beam, "batch": batch, "max_length": max_length, "options": options}
        return self.call(job)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="TREE:BUNDLE of the baseline (bundle relative to the tree)")
    parser.add_argument("--b", required=True, help="TREE:BUNDLE of the candidate")
    parser.add_argument("--input", default=str(ROOT / "data" / "en-de" / "test.tsv"), help="TSV, first column")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--beams", default="4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch1-sentences", type=int, default=64, help="fewer sentences at batch 1 (slow)")
    parser.add_argument(
        "--static-step",
        action="store_true",
        help="both sides decode with fixed-shape state (Engine.load static_step: the bundles need --static-step)",
    )
    add_server_options(parser)
    parser.add_argument("--out", default=str(report_dir("engine-ab") / "report"))
    args = parser.parse_args(argv)
    options = SERVER_SEARCH if args.server_options else {}

    lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    texts = [line.split("\t")[0] for line in lines if line.strip()][: args.sentences]
    sides = {"a": Side(args.a, args.threads, args.static_step), "b": Side(args.b, args.threads, args.static_step)}
    rows = []
    try:
        for beam in map(int, args.beams.split(",")):
            for batch in map(int, args.batch_sizes.split(",")):
                subset = texts[: args.batch1_sentences] if batch == 1 else texts
                runs: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
                for _ in range(args.repeats):
                    for key, side in sides.items():
                        runs[key].append(side.run(subset, beam, batch, args.max_length, options))
                outputs = {key: runs[key][-1]["outputs"] for key in runs}
                tokens = sum(len(o) for o in outputs["a"])
                row: dict[str, Any] = {"beam": beam, "batch": batch, "sentences": len(subset)}
                for key in runs:
                    seconds = [r["seconds"] for r in runs[key]]
                    row[key] = {
                        "seconds": seconds,
                        "tokens_per_s": sum(len(o) for o in outputs[key]) / statistics.median(seconds),
                    }
                row["ratio_b_over_a"] = row["b"]["tokens_per_s"] / row["a"]["tokens_per_s"]
                row["per_repeat_ratios"] = [
                    ra["seconds"] / rb["seconds"] for ra, rb in zip(runs["a"], runs["b"], strict=True)
                ]
                row["identical"] = sum(x == y for x, y in zip(outputs["a"], outputs["b"], strict=True)) / len(subset)
                row["tokens"] = tokens
                rows.append(row)
                print(
                    f"beam {beam} batch {batch}: a {row['a']['tokens_per_s']:.0f} tok/s, "
                    f"b {row['b']['tokens_per_s']:.0f} tok/s, b/a {row['ratio_b_over_a']:.2f}, "
                    f"identical {row['identical']:.3f}",
                    flush=True,
                )
    finally:
        for side in sides.values():
            side.close()
    setup = {
        "date": time.strftime("%Y-%m-%d"),
        "a": f"{args.a} ({sides['a'].model})",
        "b": f"{args.b} ({sides['b'].model})",
        "input": args.input,
        "threads": args.threads,
        "static_step": args.static_step,
        "repeats": args.repeats,
        "max_length": args.max_length,
        "options": options,
        "machine": machine(),
    }
    table = [
        f"Generated by `python -m bench engine-ab` on {setup['date']}: a = `{setup['a']}`, b = `{setup['b']}`, "
        f"{args.threads} onnxruntime threads each, first column of {Path(args.input).name}, median of "
        f"{args.repeats} alternated runs"
        + (", fixed-shape (static-step) state" if args.static_step else "")
        + (f", the server's search options {options}" if options else "")
        + ".",
        "",
        "| beam | batch | sentences | a tok/s | b tok/s | b/a | b/a per repeat | identical best |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = ", ".join(f"{x:.2f}" for x in r["per_repeat_ratios"])
        table.append(
            f"| {r['beam']} | {r['batch']} | {r['sentences']} | {r['a']['tokens_per_s']:.0f} | "
            f"{r['b']['tokens_per_s']:.0f} | {r['ratio_b_over_a']:.2f} | {per} | {r['identical']:.3f} |"
        )
    markdown = "\n".join(table) + "\n"
    print(markdown)
    write_report(Path(args.out), markdown, {"setup": setup, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
