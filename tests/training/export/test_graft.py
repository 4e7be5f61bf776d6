from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.bundle import BundleError, read_manifest
from core.translation import DecodeOptions
from inference.engine import Engine
from training.export.graft import graft


@pytest.fixture
def plain_gpu_bundle(tiny_checkpoint: Path, tmp_path: Path) -> Path:
    """The tiny model with a GPU set that has no static-shape graphs (what the shipped de-en has)."""
    from training.export import export_bundle

    out = tmp_path / "plain"
    meta = {"name": "tiny-reverse", "version": "1", "source_language": "en", "target_language": "de"}
    export_bundle(tiny_checkpoint, out, **meta, gpu_dtype="fp32")  # type: ignore[arg-type]
    return out


def test_a_grafted_gpu_set_serves_static_steps_and_the_main_graphs_stay(
    plain_gpu_bundle: Path, tiny_static_bundle: Path
) -> None:
    """graft puts the static bundle's GPU set into the plain one: the target then decodes with static steps as the
    source does, token for token, its manifest checks out, and its main graphs are byte for byte what they were."""
    before = read_manifest(plain_gpu_bundle)
    with pytest.raises(Exception, match="static"):  # the plain GPU set has no static step to serve
        Engine.load(plain_gpu_bundle, provider="cpu", graphs="cuda", static_step=True)
    variant = graft(tiny_static_bundle, plain_gpu_bundle)
    after = read_manifest(plain_gpu_bundle)  # verifies every file's sha256
    assert "static_decoder" in variant["graphs"] and after["variants"]["cuda"] == variant
    main = {name: entry for name, entry in before["files"].items() if not name.startswith("cuda/")}
    assert {name: entry for name, entry in after["files"].items() if not name.startswith("cuda/")} == main
    assert not [p for p in plain_gpu_bundle.iterdir() if p.name.startswith(".")]  # no staging left behind
    options = DecodeOptions(beam_size=3, max_length=12)
    texts = ["a b c", "c c a b", "b"]
    grafted = Engine.load(plain_gpu_bundle, provider="cpu", graphs="cuda", static_step=True)
    source = Engine.load(tiny_static_bundle, provider="cpu", graphs="cuda", static_step=True)
    assert [t.best.token_ids for t in grafted.translate(texts, options)] == [
        t.best.token_ids for t in source.translate(texts, options)
    ]


def test_graft_refuses_another_model_and_changes_nothing(
    plain_gpu_bundle: Path, tiny_static_bundle: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    shutil.copytree(tiny_static_bundle, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["architecture"]["d_ff"] += 1
    (other / "manifest.json").write_text(json.dumps(manifest))
    before = (plain_gpu_bundle / "manifest.json").read_bytes()
    with pytest.raises(BundleError, match="not the same model"):
        graft(other, plain_gpu_bundle)
    with pytest.raises(BundleError, match="no graph set 'gpu2'"):
        graft(tiny_static_bundle, plain_gpu_bundle, "gpu2")
    assert (plain_gpu_bundle / "manifest.json").read_bytes() == before
