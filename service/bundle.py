"""The model bundle: one directory, one ``manifest.json``, read and written here by both sides.

``training.export`` writes bundles with :func:`write_manifest`; the service reads them with
:func:`read_manifest`, which refuses a bundle whose files are missing, altered or of an unknown format.
No torch and no onnx here: the service image has neither. The format is documented in docs/bundle.md.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"
FORMAT = "transformer-nmt-bundle"
FORMAT_VERSION = 3
SUPPORTED_FORMAT_VERSIONS = (3,)
"""1: one stacked (layers, ...) self-attention cache tensor; 2: one cache tensor per layer; 3: also one
cross-attention K/V tensor per layer, 2-D projections fused with their bias (each step faster)."""

ENCODER_FILE = "encoder.onnx"
DECODER_FILE = "decoder.onnx"
SELECT_FILE = "select.onnx"
GRAPHS = ("encoder", "decoder", "select")


def cache_names(prefix: str, layers: int) -> list[str]:
    """Per-layer key/value tensors: ``prefix`` "past" (decoder inputs) or "present" (decoder outputs), each
    (rows, heads, steps, d_head), or "cross" (encoder outputs, decoder inputs), each (batch, heads, src_len,
    d_head) -> [prefix_k_0, prefix_v_0, prefix_k_1, prefix_v_1, ...]."""
    return [f"{prefix}_{kv}_{i}" for i in range(layers) for kv in ("k", "v")]


# Top-level keys every manifest carries; read_manifest refuses one that lacks any of them.
REQUIRED_KEYS = (
    "format",
    "format_version",
    "name",
    "version",
    "source_language",
    "target_language",
    "architecture",
    "special_ids",
    "vocabulary",
    "max_source_pieces",
    "graphs",
    "export",
    "files",
    "scores",
)
ARCHITECTURE_KEYS = (
    "encoder_layers",
    "decoder_layers",
    "d_model",
    "n_heads",
    "d_head",
    "d_ff",
    "vocab_size",
    "max_positions",
)


class BundleError(Exception):
    """A bundle is missing, damaged or of an unknown format; the message says which file and what to do."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(bundle_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """Fill in ``files`` (sha256 and size of every file beside the manifest) and write manifest.json.

    Every other key is the caller's; missing required keys are refused so that no reader ever sees an
    incomplete manifest.
    """
    directory = Path(bundle_dir)
    if not directory.is_dir():
        raise BundleError(f"bundle directory {directory} does not exist")
    manifest = dict(manifest)
    manifest.setdefault("format", FORMAT)
    manifest.setdefault("format_version", FORMAT_VERSION)
    manifest.setdefault("scores", {})
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != MANIFEST_FILE:
            rel = path.relative_to(directory).as_posix()
            files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    manifest["files"] = files
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise BundleError(f"cannot write {directory / MANIFEST_FILE}: keys {missing} are missing")
    out = directory / MANIFEST_FILE
    out.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def read_manifest(bundle_dir: str | Path, *, verify: bool = True) -> dict[str, Any]:
    """Parse manifest.json and, with ``verify``, check every listed file's presence, size and sha256."""
    directory = Path(bundle_dir)
    path = directory / MANIFEST_FILE
    if not directory.is_dir():
        raise BundleError(
            f"bundle directory {directory} does not exist: pass a directory made by `python -m training export`"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise BundleError(
            f"{path} is missing: {directory} is not a model bundle; "
            "create one with `python -m training export CHECKPOINT OUT_DIR`"
        ) from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BundleError(f"{path} is not valid JSON ({err}); re-export the bundle") from err
    if not isinstance(manifest, dict):
        raise BundleError(f"{path} must hold a JSON object, got {type(manifest).__name__}")
    if manifest.get("format") != FORMAT:
        raise BundleError(
            f"{path}: format is {manifest.get('format')!r}, expected {FORMAT!r}; this is not a bundle of this project"
        )
    version = manifest.get("format_version")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise BundleError(
            f"{path}: format_version {version!r} is not supported by this service (it reads "
            f"{', '.join(map(str, SUPPORTED_FORMAT_VERSIONS))}); re-export the bundle with a matching "
            "training package or upgrade the service"
        )
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise BundleError(f"{path} lacks the keys {missing}; re-export the bundle")
    arch_missing = [key for key in ARCHITECTURE_KEYS if key not in manifest["architecture"]]
    if arch_missing:
        raise BundleError(f"{path}: architecture lacks {arch_missing}; re-export the bundle")
    for role in GRAPHS:
        graph = manifest["graphs"].get(role)
        if not isinstance(graph, dict) or "file" not in graph:
            raise BundleError(f"{path}: graphs.{role}.file is missing; re-export the bundle")
        if graph["file"] not in manifest["files"]:
            raise BundleError(f"{path}: graphs.{role}.file {graph['file']!r} is not listed in files")
    if verify:
        verify_files(directory, manifest)
    return manifest


def verify_files(bundle_dir: str | Path, manifest: dict[str, Any]) -> None:
    """Every file listed in the manifest exists with the recorded size and sha256."""
    directory = Path(bundle_dir)
    for name, entry in manifest["files"].items():
        path = directory / name
        if not path.is_file():
            raise BundleError(
                f"bundle file {path} is missing (listed in {MANIFEST_FILE}); "
                "copy the whole bundle directory again or re-export it"
            )
        size = path.stat().st_size
        if "bytes" in entry and size != entry["bytes"]:
            raise BundleError(
                f"bundle file {path} has {size} bytes, the manifest says {entry['bytes']}: "
                "the file is truncated or was replaced; copy or re-export the bundle"
            )
        actual = sha256_file(path)
        if actual != entry.get("sha256"):
            raise BundleError(
                f"bundle file {path} has sha256 {actual}, the manifest says "
                f"{entry.get('sha256')}: the file is damaged or was replaced; "
                "copy or re-export the bundle"
            )
