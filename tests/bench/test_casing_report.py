"""bench casing: which sentences it puts where, and its report."""

from __future__ import annotations

import json
from pathlib import Path

from bench import casing
from testkit.synthetic import make_pairs


def test_the_report_scores_each_reading_and_finds_the_real_capitals(tiny_bundle: Path, tmp_path: Path) -> None:
    pairs = make_pairs(10, seed=5) + [("GOLD PINK", "PINK GOLD"), ("NAVY-TEAL", "TEAL NAVY")]
    tsv = tmp_path / "test.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    out = tmp_path / "report"
    assert (
        casing.main([str(tiny_bundle), "--inputs", str(tsv), "--sentences", "6", "--threads", "1", "--out", str(out)])
        == 0
    )
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert data["drawn"] == 6 and len(data["capitals"]) == 5
    assert all(0 <= row["bleu"] <= 100 and 0 <= row["chrf"] <= 100 for row in data["capitals"].values())
    assert data["real_count"] == 2 and set(data["real"]) == {"read as they are", "folded (the engine)"}
    lower = [s for s, _ in make_pairs(10, seed=5) if len(s.split()) >= 3]
    assert data["lower_count"] == len(lower)
    report = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "| NAVY-TEAL |" in report and "folded with the table (the engine)" in report
