"""bench running-sets on the tiny bundle: the three ways decode every sentence, and the counters it patches into the
engine (graph calls, cache cells) see the calls (it broke once when the decoder step took one more argument)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import running_sets
from bench.loadtools import WORDS


def test_running_sets_counts_every_way_s_graph_calls(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inference.engine import DeviceState

    monkeypatch.setattr(DeviceState, "step", DeviceState.step)  # the bench patches the class: put it back after
    source = tmp_path / "in.tsv"
    lines = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(2 + i % 5)) for i in range(12)]
    source.write_text("".join(f"{line}\t{line}\n" for line in lines), encoding="utf-8")
    out = tmp_path / "report"
    args = ["--bundle", str(tiny_bundle), "--input", str(source), "--sentences", "12", "--size", "4"]
    assert running_sets.main([*args, "--repeats", "1", "--threads", "1", "--out", str(out)]) in (0, None)
    rows = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))["rows"]
    assert [r["way"] for r in rows] == ["batches", "refilled", "refilled, one cohort"]
    for row in rows:
        assert row["decoder_calls"] > 0 and row["encoder_calls"] > 0 and row["cells_millions"] > 0, row
    assert rows[0]["encoder_calls"] == 3  # 12 sentences, 4 at a time
