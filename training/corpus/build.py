"""The whole pipeline: collect every source, assemble, write (``build_corpus``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from training.corpus.collect import SourceData, collect_source, resolve_sources
from training.corpus.report import (
    build_report,
    remove_previous_outputs,
    render_licenses_md,
    render_report_md,
    write_splits,
)
from training.corpus.sources import (
    SOURCES,
)
from training.corpus.split import assemble_corpus


def collect_all(names: list[str], cache_dir: Path) -> dict[str, SourceData]:
    """Fetch and align every named source, printing one line per source."""
    collected: dict[str, SourceData] = {}
    for name in tqdm(names, desc="corpus sources", unit="source", disable=None):
        start = time.monotonic()
        data = collect_source(SOURCES[name], cache_dir)
        units = len({p.unit for p in data.pairs})
        took = time.monotonic() - start
        tqdm.write(f"{name}: {len(data.pairs)} raw pairs from {units} units ({took:.1f}s)")
        collected[name] = data
    return collected


def build_corpus(
    out_dir: Path,
    cache_dir: Path,
    sources: list[str] | None = None,
    seed: int = 1,
    *,
    heldout_targets: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Download, align, clean, split and write the corpus; returns the report dict."""
    started = time.monotonic()
    out_dir, cache_dir = Path(out_dir), Path(cache_dir)
    names = resolve_sources(sources)
    cache_dir.mkdir(parents=True, exist_ok=True)
    collected = collect_all(names, cache_dir)
    seconds = {"fetch_and_align": time.monotonic() - started}

    step = time.monotonic()
    splits = assemble_corpus((p for d in collected.values() for p in d.pairs), seed, heldout_targets)
    seconds["clean_and_split"] = time.monotonic() - step

    out_dir.mkdir(parents=True, exist_ok=True)
    remove_previous_outputs(out_dir)
    file_sizes = write_splits(out_dir, splits)
    seconds["total"] = time.monotonic() - started
    report = build_report(splits, collected, file_sizes, seed, seconds)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "report.md").write_text(render_report_md(report), encoding="utf-8")
    (out_dir / "LICENSES.md").write_text(render_licenses_md(collected), encoding="utf-8")
    return report
