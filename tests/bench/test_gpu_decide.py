"""bench/gpu_session/decide.py: a GPU run's reports read into the issue's targets and the opt-in cuts' verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gpu_session import decide

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "docs" / "reports" / "gpu" / "h100-2026-11-27"


def _line(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def test_session_42s_h100_reports_give_the_documented_targets() -> None:
    """Recomputed from the report's own JSON here, not from decide's helpers: the best batch-1 sentence, the best
    batch-128 rate, fp16 over fp32 static steps; the base preset from its markdown (device.sh keeps no JSON of it)."""
    text = decide.report(H100)
    rows = json.loads((H100 / "targets.json").read_text(encoding="utf-8"))["rows"]
    one = max((r for r in rows if r["batch"] == 1), key=lambda r: r["sentences_per_s"])
    ms = 1000 / one["sentences_per_s"]
    scaled = ms * 25 / (one["tokens_per_s"] / one["sentences_per_s"])
    assert f"{ms:.2f} ms" in _line(text, "| batch 1 <=") and f"{scaled:.2f} scaled" in _line(text, "| batch 1 <=")
    assert _line(text, "| batch 1 <=").endswith("| not met |") and scaled > 8
    large = max(r["tokens_per_s"] for r in rows if r["batch"] == 128)
    assert f"| {large:,.0f} |" in _line(text, "| batch 128 >=") and _line(text, "| batch 128 >=").endswith("not met |")
    by = {(r["batch"], r["system"]): r for r in rows}
    ratio = by[128, "cuda-fp16-static"]["tokens_per_s"] / by[128, "cuda-fp32-static"]["tokens_per_s"]
    assert f"{ratio:.2f}x" in _line(text, "| fp16 >=") and _line(text, "| fp16 >=").endswith("| met |")
    assert "| 12,044 | cuda-fp16-static | met |" in _line(text, "| base preset")  # targets-base.md's row
    assert "| 562.0 / 585.6 |" in _line(text, "| server >=")
    # the static-step server served less than the default at both levels: it does not win
    assert "| server continuous:static-step | continuous | both | | | does not win |" in text
    assert "continuous:static-step 19.5" in text  # seconds to ready


def test_opt_in_cuts_win_only_faster_and_alike(tmp_path: Path) -> None:
    """Lanes faster and 98 % alike win at 128; faster but 90 % alike (under the 97 % bar) do not at 1; the
    decoder-masked step slower does not; a server wins only by serving more at both levels. Against itself as
    the baseline every ratio is 1.00x."""

    def row(batch: int, system: str, tok_s: float, identical: float) -> dict[str, object]:
        return {
            "beam": 4,
            "batch": batch,
            "system": system,
            "tokens_per_s": tok_s,
            "sentences_per_s": tok_s / 30,
            "identical_to_cuda_fp32": identical,
        }

    rows = [
        row(1, "cuda-fp16-fused-static", 3000, 0.95),
        row(1, "cuda-fp16-fused-static-lanes2", 3100, 0.90),
        row(128, "cuda-fp16-fused-static", 38000, 0.95),
        row(128, "cuda-fp16-fused-static-lanes2", 41000, 0.98),
        row(128, "cuda-fp16-fused-static-dmmha", 36000, 0.99),
    ]
    (tmp_path / "targets.json").write_text(json.dumps({"meta": {}, "rows": rows}), encoding="utf-8")
    load = {
        "setup": {"ready_s": {"continuous": 4.0}},
        "results": {
            "continuous": [{"clients": 64, "sentences_per_s": 500.0}, {"clients": 128, "sentences_per_s": 600.0}],
            "continuous:static-step": [
                {"clients": 64, "sentences_per_s": 550.0},
                {"clients": 128, "sentences_per_s": 590.0},
            ],
            "continuous:inflight-batches=2+lanes=2": [
                {"clients": 64, "sentences_per_s": 520.0},
                {"clients": 128, "sentences_per_s": 660.0},
            ],
        },
    }
    (tmp_path / "targets-load.json").write_text(json.dumps(load), encoding="utf-8")
    text = decide.report(tmp_path, tmp_path)
    assert "| cuda-fp16-fused-static-lanes2 | cuda-fp16-fused-static | 128 | 1.08x | 98% | wins |" in text
    assert "| cuda-fp16-fused-static-lanes2 | cuda-fp16-fused-static | 1 | 1.03x | 90% | does not win |" in text
    assert "| cuda-fp16-fused-static-dmmha | cuda-fp16-fused-static | 128 | 0.95x | 99% | does not win |" in text
    assert "| cuda-fp16-fused-static-dmmha | cuda-fp16-fused-static | 1 | missing |" in text  # not measured there
    assert "| server continuous:static-step | continuous | both | | | does not win |" in text  # 0.98x at 128
    assert "| server continuous:inflight-batches=2+lanes=2 | continuous | both | | | wins |" in text
    assert "| 41,000 | cuda-fp16-fused-static-lanes2 | met |" in _line(text, "| batch 128 >=")
    assert "missing" in _line(text, "| fp16 against fp32") and "missing" in _line(text, "| base preset")
    against = text.split("## Against", 1)[1]
    ratios = [line.rsplit("|", 2)[1].strip() for line in against.splitlines() if line.startswith("| c")]
    assert len(ratios) == len(rows) + 6 and set(ratios) == {"1.00x"}


def test_an_empty_run_says_so(tmp_path: Path) -> None:
    text = decide.report(tmp_path)
    assert "nothing measured to decide on" in text and "| batch 1 | missing |" in text
