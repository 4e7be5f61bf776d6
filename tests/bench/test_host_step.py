"""bench host-step: each worker decodes with the tree's real engine, then again with every static step's run replaced
by the outputs recorded for it (the worker asserts that the replay translates as the real run did)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import host_step
from bench.loadtools import WORDS


def test_host_step_replays_each_trees_decode_and_writes_its_report(tiny_static_bundle: Path, tmp_path: Path) -> None:
    source = tmp_path / "input.tsv"
    lines = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(3 + i % 5)) for i in range(12)]
    source.write_text("".join(f"{line}\tx\n" for line in lines), encoding="utf-8")
    out = tmp_path / "report"
    argv = ["--bundle", str(tiny_static_bundle), "--input", str(source), "--a", ".", "--b", "."]
    status = host_step.main([*argv, "--batch-sizes", "1,4", "--sentences", "8", "--repeats", "1", "--out", str(out)])
    assert status == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert [row["batch"] for row in data["rows"]] == [1, 4]
    for row in data["rows"]:
        assert row["same_outputs"] is True
        assert row["steps"] > 0
        assert all(us > 0 for us in row["a"] + row["b"])
    assert "| 4 |" in out.with_suffix(".md").read_text(encoding="utf-8")
