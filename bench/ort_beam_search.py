"""onnxruntime's own BeamSearch operator (the whole search in one run) against our Python loop over the step graphs.

    python -m bench ort-beam-search --checkpoint CKPT [--input data/en-de/test.tsv] [--sentences 256]
        [--batch-sizes 1,32] [--beam 4] [--max-length 128] [--threads 2] [--provider cpu] [--repeats 3]
        [--out docs/reports/ort-beam-search/report]

Both run the same fp32 weights (exported from CKPT: an fp32 bundle for the engine, and
``training/export/ort_beam_search.py``'s BeamSearch model), on the same provider and threads, the same sentences in
the same batches, beam size, length penalty 1.0 and length cap (``--max-length`` pieces, EOS included; no relative
cap). They are run alternately ``--repeats`` times per batch size; the figures are medians: target tokens/s (the
best hypothesis' pieces, EOS not counted, each system's own), sentences/s, and the share of best outputs
identical to the engine's (the operator follows Hugging Face's beam rules, not ours). The engine's loop also
returns n-best lists, per-token scores and attention, which the operator does not. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort

from bench.loadtools import ROOT, command_line, report_dir, report_path, write_report
from core.translation import DecodeOptions
from inference.engine import Engine, choose_providers
from inference.threads import session_options

SYSTEMS = ("python-loop", "ort-beam-search")


def read_sources(path: Path, n: int) -> list[str]:
    lines = [line.split("\t")[0] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[:n]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(ROOT / "runs" / "en-de-0.9-soup" / "ship" / "averaged.pt"))
    parser.add_argument("--input", default=str(ROOT / "data" / "en-de" / "test.tsv"))
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=128, help="length cap in pieces, EOS included")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--provider", default="cpu", help="cpu or cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(report_dir("ort-beam-search") / "report"))
    args = parser.parse_args(argv)

    from training.checkpoint import load_model  # torch: only the exports need it
    from training.export import export_bundle
    from training.export.ort_beam_search import export_beam_search, run_beam_search

    work = Path(tempfile.mkdtemp(prefix="bench-ort-beam-"))
    print("exporting ...", flush=True)
    export_bundle(args.checkpoint, work / "fp32")
    operator_path = export_beam_search(load_model(Path(args.checkpoint))[0], work / "beam_search.onnx")
    engine = Engine.load(work / "fp32", provider=args.provider, threads=args.threads)
    options = session_options(args.threads)  # as the engine's sessions
    operator = ort.InferenceSession(str(operator_path), options, providers=choose_providers(args.provider))

    texts = read_sources(Path(args.input), args.sentences)
    sources = [engine.tokenize(t) for t in texts]
    decode_options = DecodeOptions(
        beam_size=args.beam, length_penalty=1.0, max_length=args.max_length, max_length_ratio=1e6
    )

    def run(system: str, batch: int) -> tuple[float, list[list[int]]]:
        outputs: list[list[int]] = []
        started = time.perf_counter()
        for lo in range(0, len(sources), batch):
            chunk = sources[lo : lo + batch]
            if system == "python-loop":
                outputs += [t.best.token_ids for t in engine.translate_ids(chunk, decode_options)]
            else:
                outputs += run_beam_search(operator, engine, chunk, args.beam, args.max_length)
        return time.perf_counter() - started, outputs

    for system in SYSTEMS:  # first-call allocations out of the timings
        run(system, 8)
    rows: list[dict[str, Any]] = []
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        seconds: dict[str, list[float]] = {s: [] for s in SYSTEMS}
        outputs: dict[str, list[list[int]]] = {}
        for _ in range(args.repeats):
            for system in SYSTEMS:
                elapsed, outputs[system] = run(system, batch)
                seconds[system].append(elapsed)
        pairs = [seconds["ort-beam-search"][i] / seconds["python-loop"][i] for i in range(args.repeats)]
        for system in SYSTEMS:
            median = statistics.median(seconds[system])
            same = sum(a == b for a, b in zip(outputs[system], outputs["python-loop"], strict=True))
            row = {
                "batch": batch,
                "system": system,
                "seconds": [round(s, 4) for s in seconds[system]],
                "tokens_per_s": sum(map(len, outputs[system])) / median,
                "sentences_per_s": len(sources) / median,
                "identical_to_python_loop": same / len(sources),
                "speed_vs_python_loop": [round(1 / p, 3) for p in pairs] if system != "python-loop" else None,
            }
            rows.append(row)
            print(
                f"batch {batch:>4} {system:>16}: {row['tokens_per_s']:8.0f} tok/s {row['sentences_per_s']:7.1f} sent/s"
                f"  identical {row['identical_to_python_loop']:.0%}",
                flush=True,
            )

    meta = {
        "command": command_line("ort-beam-search", argv),
        "onnxruntime": ort.__version__,
        "python": platform.python_version(),
        "provider": engine.provider,
        "threads": args.threads,
        "sentences": len(sources),
        "beam": args.beam,
        "max_length": args.max_length,
        "checkpoint": args.checkpoint,
        "repeats": args.repeats,
    }
    lines = [
        "# onnxruntime's BeamSearch operator against our Python loop",
        "",
        f"`{meta['command']}`: {meta['checkpoint']}, fp32, onnxruntime {meta['onnxruntime']} on "
        f"{meta['provider']}, {meta['threads']} threads, {meta['sentences']} sentences, beam {meta['beam']}, "
        f"length penalty 1.0, cap {meta['max_length']} pieces, median of {meta['repeats']} alternated runs.",
        "",
        "| batch | system | target tok/s | sentences/s | operator / loop speed, per repeat | best output identical |",
        "|---:|---|---:|---:|---|---:|",
    ]
    for r in rows:
        ratio = ", ".join(f"{v:.2f}x" for v in r["speed_vs_python_loop"]) if r["speed_vs_python_loop"] else "-"
        lines.append(
            f"| {r['batch']} | {r['system']} | {r['tokens_per_s']:.0f} | {r['sentences_per_s']:.1f} | {ratio} | "
            f"{r['identical_to_python_loop']:.0%} |"
        )
    out = Path(args.out)
    write_report(out, "\n".join(lines) + "\n", {"meta": meta, "rows": rows})
    print(f"wrote {report_path(out, '.md')} and {report_path(out, '.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
