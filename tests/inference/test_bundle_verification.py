"""A damaged or foreign bundle is refused with a message that names the file and the fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.bundle import BundleError, read_manifest, write_manifest
from inference.engine import Engine


@pytest.fixture
def bundle(tiny_bundle: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_bundle, tmp_path / "bundle"))


def _edit_manifest(bundle: Path, **changes: object) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.update(changes)
    path.write_text(json.dumps(manifest), encoding="utf-8")


def test_intact_bundle_is_accepted(bundle: Path) -> None:
    assert read_manifest(bundle)["files"]


def test_wrong_checksum(bundle: Path) -> None:
    decoder = bundle / "decoder.onnx"
    data = bytearray(decoder.read_bytes())
    data[len(data) // 2] ^= 0xFF
    decoder.write_bytes(bytes(data))
    with pytest.raises(BundleError, match=r"decoder.onnx has sha256 [0-9a-f]{64}, the manifest says"):
        Engine.load(bundle)


def test_truncated_file(bundle: Path) -> None:
    encoder = bundle / "encoder.onnx"
    encoder.write_bytes(encoder.read_bytes()[:-10])
    with pytest.raises(BundleError, match=r"encoder.onnx has \d+ bytes, the manifest says"):
        read_manifest(bundle)


def test_missing_file(bundle: Path) -> None:
    (bundle / "vocab.json").unlink()
    with pytest.raises(BundleError, match=r"vocab.json is missing .*re-export"):
        Engine.load(bundle)


def test_unknown_format_version(bundle: Path) -> None:
    _edit_manifest(bundle, format_version=99)
    with pytest.raises(BundleError, match="format_version 99 is not supported"):
        Engine.load(bundle)


def test_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="manifest.json is missing"):
        read_manifest(tmp_path)
    with pytest.raises(BundleError, match="does not exist"):
        read_manifest(tmp_path / "nowhere")
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BundleError, match="not valid JSON"):
        read_manifest(tmp_path)


def test_incomplete_manifest(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    del manifest["special_ids"]
    (bundle / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(BundleError, match="lacks the keys \\['special_ids'\\]"):
        read_manifest(bundle)
    with pytest.raises(BundleError, match="special_ids"):
        write_manifest(bundle, manifest)


def test_rewritten_manifest_covers_new_files(bundle: Path) -> None:
    manifest = read_manifest(bundle)
    (bundle / "README.txt").write_text("notes", encoding="utf-8")
    write_manifest(bundle, manifest)
    assert "README.txt" in read_manifest(bundle)["files"]
