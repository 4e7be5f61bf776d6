"""bench refusal-cost: each tree's real server, its queue held full by the fake engine, refuses every request."""

from __future__ import annotations

import json
from pathlib import Path

from bench import refusal_cost


def test_refusal_cost_times_refusals_of_two_trees_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "report"
    status = refusal_cost.main(
        ["--a", ".", "--b", ".", "--sizes", "2x10,30x50", "--requests", "12", "--repeats", "1", "--out", str(out)]
    )
    assert status == 0  # a request not refused with 503 fails its worker, and the run
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert set(data["median"]) == {"a", "b"}
    for side in ("a", "b"):
        assert set(data["median"][side]) == {"2x10", "30x50"}
        assert all(ms > 0 for ms in data["median"][side].values())
    assert "| 30 texts of 50 characters |" in out.with_suffix(".md").read_text(encoding="utf-8")
