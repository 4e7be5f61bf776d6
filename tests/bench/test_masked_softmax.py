"""bench masked-softmax: every case runs, and the floored chain gives the log-softmax over each row's listed entries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench import masked_softmax


def test_the_floored_chain_is_the_log_softmax_over_the_listed_entries() -> None:
    session, reads = masked_softmax.graphs(threads=1)["floored"]
    (_, _, feeds), *_ = [c for c in masked_softmax.cases(3, 50, 0.5, seed=1) if c[0] == "floored"]
    (got,) = session.run(None, {k: feeds[k] for k in reads})
    listed = np.isfinite(feeds["mask"])
    for row in range(3):
        x = feeds["x"][row, listed[row]].astype(np.float64)
        assert np.allclose(got[row, listed[row]], x - np.logaddexp.reduce(x), atol=1e-5)
        assert np.all(got[row, ~listed[row]] < got[row, listed[row]].min())


def test_the_bench_writes_every_case(tmp_path: Path) -> None:
    out = tmp_path / "report"
    argv = ["--shapes", "4x40", "--runs", "2", "--repeats", "1", "--threads", "1", "--out", str(out)]
    assert masked_softmax.main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert {r["case"] for r in data["results"]} == {
        "finite",
        "-inf",
        "max - 60",
        "max - 100",
        "floored",
        "Where",
        "Add",
    }
    assert all(r["ms"] > 0 for r in data["results"])
