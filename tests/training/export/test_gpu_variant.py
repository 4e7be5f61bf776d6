"""A bundle with a second graph set for the GPU (``--gpu-dtype``): written, verified, and chosen by provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.bundle import BundleError, graph_files, read_manifest
from core.graphs import GRAPHS
from core.translation import DecodeOptions
from inference.engine import Engine, EngineError, choose_graphs
from testkit.synthetic import make_pairs


@pytest.fixture(scope="module")
def dual_bundle(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.export import export_bundle

    out = tmp_path_factory.mktemp("dual") / "bundle"
    export_bundle(tiny_checkpoint, out, name="tiny-dual", quantize="int8-channel", tolerance=3.0, gpu_dtype="fp16")
    return out


def test_variant_graphs_are_listed_checked_and_typed(dual_bundle: Path) -> None:
    manifest = read_manifest(dual_bundle)
    variant = manifest["variants"]["cuda"]
    assert variant["dtype"] == "fp16" and variant["provider"] == "CUDAExecutionProvider"
    assert graph_files(manifest, "cuda") == {role: f"cuda/{role}.onnx" for role in GRAPHS}
    assert graph_files(manifest) == {role: f"{role}.onnx" for role in GRAPHS}
    assert variant["graphs"]["decoder"]["inputs"]["past_k_0"]["dtype"] == "float16"
    assert manifest["graphs"]["decoder"]["inputs"]["past_k_0"]["dtype"] == "float32"
    assert variant["parity"].get("skipped") or variant["parity"]["random"]["max_abs_diff"] < 0.1
    for role in GRAPHS:
        assert manifest["files"][f"cuda/{role}.onnx"]["sha256"]


def test_auto_takes_the_variant_of_the_provider(dual_bundle: Path) -> None:
    manifest = read_manifest(dual_bundle)
    assert choose_graphs(manifest, "auto", "CUDAExecutionProvider") == "cuda"
    assert choose_graphs(manifest, "auto", "CPUExecutionProvider") is None
    assert choose_graphs(manifest, "main", "CUDAExecutionProvider") is None
    with pytest.raises(EngineError, match="variants"):
        choose_graphs(manifest, "tpu", "CPUExecutionProvider")
    assert Engine.load(dual_bundle, provider="cpu", threads=1).graphs_dtype == "int8-channel"


def test_the_fp16_graphs_translate_like_the_main_ones(dual_bundle: Path, tiny_bundle: Path) -> None:
    """The variant's graphs run on the CPU provider too (slowly): greedy outputs agree with fp32."""
    fp16 = Engine.load(dual_bundle, provider="cpu", threads=1, graphs="cuda")
    fp32 = Engine.load(tiny_bundle, provider="cpu", threads=1)
    assert (fp16.graphs, fp16.graphs_dtype) == ("cuda", "fp16")
    texts = [source for source, _ in make_pairs(24, seed=5, min_len=2, max_len=6)]
    options = DecodeOptions(beam_size=1)
    same = sum(
        a.best.token_ids == b.best.token_ids
        for a, b in zip(fp16.translate(texts, options), fp32.translate(texts, options), strict=True)
    )
    assert same >= 0.9 * len(texts)


def test_a_variant_file_missing_from_the_manifest_is_refused(dual_bundle: Path, tmp_path: Path) -> None:
    manifest = json.loads((dual_bundle / "manifest.json").read_text(encoding="utf-8"))
    del manifest["files"]["cuda/decoder.onnx"]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(BundleError, match=r"variants\.cuda\.graphs\.decoder\.file"):
        read_manifest(broken, verify=False)
