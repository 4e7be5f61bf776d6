"""bench ban-rate: its counts of what the n-gram guard did, against what the guard's rules say they must be."""

from __future__ import annotations

import json
from pathlib import Path

from bench import ban_rate
from core.translation import DecodeOptions
from inference.engine import Engine
from testkit.synthetic import make_pairs


def test_the_counts_follow_the_guard_and_the_report_is_written(tiny_bundle: Path, tmp_path: Path) -> None:
    engine = Engine.load(tiny_bundle, provider="cpu", threads=1)
    texts = [source for source, _ in make_pairs(12, seed=4)]
    off = ban_rate.count(engine, texts, 6, DecodeOptions(beam_size=3, no_repeat_ngram_size=0))
    assert off["steps"] > 0 and off["searched"] == off["banning"] == off["steps_with_a_ban"] == 0
    # a guard of 1: every hypothesis is searched, and each one that holds a token bans it (only the first step's,
    # which hold none, ban nothing: one a sentence)
    ones = ban_rate.count(engine, texts, 6, DecodeOptions(beam_size=3, no_repeat_ngram_size=1))
    assert ones["searched"] == ones["hypotheses"] and ones["banning"] == ones["hypotheses"] - len(texts)
    assert ones["steps_with_a_ban"] == ones["steps"] - 2  # every step but each batch's first
    out = tmp_path / "report"
    assert ban_rate.main(["--bundle", str(tiny_bundle), "--input", str(_tsv(tmp_path, texts)), "--batch-sizes", "4,12",
                          "--out", str(out)]) == 0  # fmt: skip
    rows = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))["rows"]
    assert [r["batch"] for r in rows] == [4, 12]
    assert all(r["hypotheses"] >= r["searched"] >= r["banning"] and r["steps"] >= r["steps_with_a_ban"] for r in rows)
    assert "| 12 |" in out.with_suffix(".md").read_text(encoding="utf-8")


def _tsv(tmp_path: Path, texts: list[str]) -> Path:
    path = tmp_path / "input.tsv"
    path.write_text("".join(f"{text}\tx\n" for text in texts), encoding="utf-8")
    return path
