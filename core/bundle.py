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

from core.graphs import GRAPHS, OPTIONAL_GRAPHS

MANIFEST_FILE = "manifest.json"
FORMAT = "transformer-nmt-bundle"
FORMAT_VERSION = 4
SUPPORTED_FORMAT_VERSIONS = (4,)
"""1: one stacked (layers, ...) self-attention cache tensor; 2: one cache tensor per layer; 3: also one
cross-attention K/V tensor per layer, 2-D projections fused with their bias (each step faster); 4: one decoder
position per sentence (sentences admitted between steps share the running set) and the merge and trim graphs.
A bundle of an earlier format is upgraded with `python -m training import-bundle` then `export`
(docs/bundle.md)."""

GRAPH_FILES = {role: f"{role}.onnx" for role in GRAPHS + OPTIONAL_GRAPHS}
ENCODER_FILE, DECODER_FILE = GRAPH_FILES["encoder"], GRAPH_FILES["decoder"]


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
    graph_sets = {"graphs": manifest["graphs"]}
    variants = manifest.get("variants", {})
    if not isinstance(variants, dict):
        raise BundleError(f"{path}: variants must be an object; re-export the bundle")
    graph_sets |= {f"variants.{name}.graphs": v.get("graphs", {}) for name, v in variants.items()}
    for where, graphs in graph_sets.items():
        for role in GRAPHS:
            graph = graphs.get(role)
            if not isinstance(graph, dict) or "file" not in graph:
                raise BundleError(f"{path}: {where}.{role}.file is missing; re-export the bundle")
            if graph["file"] not in manifest["files"]:
                raise BundleError(f"{path}: {where}.{role}.file {graph['file']!r} is not listed in files")
    if verify:
        verify_files(directory, manifest)
    return manifest


def graph_files(manifest: dict[str, Any], variant: str | None = None) -> dict[str, str]:
    """Each graph role's file: the bundle's main graphs, or those of ``variant`` (e.g. "cuda"); the optional
    ``OPTIONAL_GRAPHS`` (the static-shape graphs, the lean step) only where the set has them."""
    graphs = manifest["graphs"] if variant is None else manifest["variants"][variant]["graphs"]
    roles = [*GRAPHS, *(role for role in OPTIONAL_GRAPHS if role in graphs)]
    return {role: str(graphs[role]["file"]) for role in roles}


def set_graphs(manifest: dict[str, Any], graph_set: str, bundle_dir: str | Path) -> dict[str, Any]:
    """The ``graphs`` entry of ``graph_set`` (``main`` or a variant's name), to read or change in place; BundleError
    naming the sets the bundle has."""
    variants = manifest.get("variants", {})
    if graph_set == "main":
        return manifest["graphs"]
    if graph_set in variants:
        return variants[graph_set]["graphs"]
    raise BundleError(f"{bundle_dir} has no graph set {graph_set!r} (its sets: main, {', '.join(sorted(variants))})")


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
