"""Replace one graph set of a bundle with another bundle's: ``python -m training graft SOURCE TARGET [--set cuda]``.

A shipped bundle's GPU set can be re-exported without touching its main graphs: import the weights
(``import-bundle TARGET CKPT --graphs cuda``), export them again with today's options into a scratch directory
(``export CKPT SOURCE --gpu-dtype fp16w --static-step``), then graft SOURCE's set into TARGET. The two bundles must
be the same model: the same architecture, special ids and vocabulary files (by sha256), else nothing is changed.
TARGET's manifest gets SOURCE's ``variants[SET]`` and the files' checksums anew; everything else stays.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from core.bundle import BundleError, read_manifest, write_manifest

SAME_MODEL = ("architecture", "special_ids", "vocabulary", "max_source_pieces")


def graft(source: str | Path, target: str | Path, graph_set: str = "cuda") -> dict[str, Any]:
    """Put ``source``'s graph set ``graph_set`` into ``target`` in place of its own; returns the new variant entry."""
    source, target = Path(source), Path(target)
    new, old = read_manifest(source), read_manifest(target)
    variant = new.get("variants", {}).get(graph_set)
    if variant is None:
        raise BundleError(f"{source} has no graph set {graph_set!r} (its sets: {sorted(new.get('variants', {}))})")
    differ = [key for key in SAME_MODEL if new.get(key) != old.get(key)]
    for name in sorted({name for name in old["vocabulary"].values() if isinstance(name, str)}):
        if new["files"].get(name, {}).get("sha256") != old["files"].get(name, {}).get("sha256"):
            differ.append(name)
    if differ:
        raise BundleError(f"{source} and {target} are not the same model (they differ in {differ}): nothing grafted")
    staged = Path(tempfile.mkdtemp(prefix=f".{graph_set}-", dir=target))  # on the target's disk: renames are atomic
    try:
        shutil.copytree(source / graph_set, staged / graph_set)
        retired = target / f".{graph_set}-retired"
        if (target / graph_set).exists():
            (target / graph_set).rename(retired)
        (staged / graph_set).rename(target / graph_set)
        shutil.rmtree(retired, ignore_errors=True)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    manifest = {key: value for key, value in old.items() if key != "files"}
    manifest["variants"] = {**old.get("variants", {}), graph_set: variant}
    write_manifest(target, manifest)
    return variant
