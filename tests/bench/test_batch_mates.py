"""bench batch-mates on the tiny fp32 bundle: float graphs translate every sentence in a batch as alone, and the
report says so; the overload and soak benches know which bundles they can hold to that."""

from __future__ import annotations

import json
from pathlib import Path

from bench import batch_mates
from bench.loadtools import WORDS, batched_like_alone


def test_float_graphs_translate_a_sentence_in_a_batch_as_alone(tiny_bundle: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.tsv"
    lines = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(2 + i % 5)) for i in range(20)]
    source.write_text("".join(f"{line}\t{line.upper()}\n" for line in lines), encoding="utf-8")
    out = tmp_path / "report"
    args = ["--bundle", str(tiny_bundle), "--input", str(source), "--sentences", "20", "--batch-sizes", "3,8"]
    assert batch_mates.main([*args, "--graphs", "main", "--threads", "1", "--out", str(out)]) == 0
    [row] = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))["rows"]
    assert row["dtype"] == "fp32" and row["sentences"] == 20
    assert row["batch 3"] == row["batch 8"] == 1.0
    assert row["bleu alone"] == row["bleu batch 8"] > 0
    assert "| main | fp32 | 100.0 % | 100.0 % |" in out.with_suffix(".md").read_text(encoding="utf-8")
    assert row["seconds batch 8"] > 0


def test_only_float_bundles_are_held_to_equal_answers(tiny_bundle: Path, tmp_path: Path) -> None:
    assert batched_like_alone(tiny_bundle)
    quantized = tmp_path / "q"
    quantized.mkdir()
    manifest = json.loads((tiny_bundle / "manifest.json").read_text(encoding="utf-8"))
    manifest.setdefault("export", {})["quantize"] = "int8-channel"
    (quantized / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert not batched_like_alone(quantized)
    manifest["export"]["quantize"] = "int8-static-fp32-logits"  # input scales fixed at export: batch-independent
    (quantized / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert batched_like_alone(quantized)
