"""bench cache: two real servers (the tiny model), cache off and on, the same requests; the hit rates it reports
are the ones its requests must give, one client at a time."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from bench import cache
from bench.loadtools import WORDS


def test_the_cache_bench_counts_the_hits_its_pages_must_give(tiny_bundle: Path, tmp_path: Path) -> None:
    sentences = tmp_path / "sentences.txt"  # distinct sentences of the tiny model's words
    sentences.write_text("\n".join(" ".join(p) for p in itertools.permutations(WORDS[:6], 3)) + "\n", encoding="utf-8")
    out = tmp_path / "report"
    args = ["--bundle", str(tiny_bundle), "--input", str(sentences), "--repeated", "0,2", "--per-request", "4"]
    args += ["--pool", "3", "--requests", "6", "--clients", "1", "--rounds", "2", "--out", str(out)]
    assert cache.main(args) == 0
    runs = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))["runs"]
    rates = {(r["round"], r["repeated"]): r["hit_rate"] for r in runs}
    # 6 pages of 4: nothing repeats (0), or 2 of the 3 pool sentences each (12 lookups, the first 3 miss in round 0)
    assert rates == {(0, 0): 0.0, (0, 2): 9 / 24, (1, 0): 0.0, (1, 2): 12 / 24}
    assert all(r["on_sentences_per_s"] > 0 and r["off_sentences_per_s"] > 0 for r in runs)
    assert "| 2 of 4 |" in out.with_suffix(".md").read_text(encoding="utf-8")
