"""What each loaded model costs in memory, for sizing a server that holds several (docs/service.md).

    python -m bench model-memory [BUNDLE ...] [--out docs/reports/model-memory/report]

Each bundle is measured in a fresh process on the CPU provider: resident memory (RSS) after importing the engine,
after loading the bundle and its warm-up, and after translating 64 test sentences at beam 4 (batches of 16,
what a serving model holds at steady state). The language detector for `auto` and /detect (lingua, English
and German) is measured the same way. Figures are MiB; RSS includes shared libraries only once per process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.loadtools import ROOT, report_dir, report_path, write_report

SENTENCES = [
    "The file could not be saved because the disk is full.",
    "Click the button to open the settings dialog.",
    "Select the text you want to copy, then press Ctrl+C.",
    "The server returned an error while downloading the update.",
] * 16


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure_bundle(bundle: str) -> dict[str, object]:
    from core.translation import DecodeOptions
    from inference.engine import Engine

    base = rss_mib()
    engine = Engine.load(bundle, provider="cpu", threads=2)
    engine.warmup()
    loaded = rss_mib()
    ids = [engine.tokenize(s) for s in SENTENCES]
    for start in range(0, len(ids), 16):
        engine.translate_ids(ids[start : start + 16], DecodeOptions(beam_size=4))
    busy = rss_mib()
    manifest = engine.manifest
    size = sum(p.stat().st_size for p in Path(bundle).rglob("*") if p.is_file()) / 2**20
    return {
        "what": f"{manifest.get('name')} {manifest.get('version')} ({bundle})",
        "files_mib": round(size, 1),
        "base_mib": round(base),
        "loaded_mib": round(loaded - base),
        "serving_mib": round(busy - base),
    }


def measure_detector() -> dict[str, object]:
    from service.detection import detector_for

    base = rss_mib()
    detector = detector_for(("de", "en"))
    detector.detect("warm-up")
    loaded = rss_mib()
    for sentence in SENTENCES:
        detector.detect(sentence)
    return {
        "what": "language detector (lingua, en+de)",
        "files_mib": None,
        "base_mib": round(base),
        "loaded_mib": round(loaded - base),
        "serving_mib": round(rss_mib() - base),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundles", nargs="*", default=[p for p in ("models/en-de", "models/de-en") if Path(p).is_dir()])
    parser.add_argument("--out", default=str(report_dir("model-memory") / "report"))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure_detector() if args.one == "detector" else measure_bundle(args.one)))
        return 0
    rows = []
    for what in [*args.bundles, "detector"]:
        command = [sys.executable, "-m", "bench", "model-memory", "--one", what]
        done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    lines = [
        "| what | files MiB | process before MiB | + loaded and warmed up | + after serving 64 sentences |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        files = "" if r["files_mib"] is None else r["files_mib"]
        lines.append(f"| {r['what']} | {files} | {r['base_mib']} | {r['loaded_mib']} | {r['serving_mib']} |")
    table = "\n".join(lines)
    print(table)
    markdown = (
        "# Memory per loaded model\n\n`python -m bench model-memory` (CPU provider, 2 threads; resident memory in "
        "MiB, each row in a fresh process).\n\n" + table + "\n"
    )
    write_report(report_path(args.out, ""), markdown, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
