"""core/, inference/ and service/ never import torch: the serving image has none. core/ and inference/
import no HTTP server either, and core/ not the inference layer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


FORBIDDEN = {
    "core": ("torch", "training", "inference", "service", "onnxruntime"),
    "inference": ("torch", "training", "service"),
    "service": ("torch", "training"),
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_serving_packages_import_no_torch_and_nothing_above_them(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)} imports {n}"
                for n in names
                if n.split(".")[0] in FORBIDDEN[package]
            ]
    assert not offenders, offenders


def test_engine_translates_with_torch_blocked(tiny_bundle: Path) -> None:
    script = f"""
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
from inference.engine import Engine
from core.translation import DecodeOptions
engine = Engine.load({str(tiny_bundle)!r}, provider="cpu", threads=1)
[t] = engine.translate(["red blue"], DecodeOptions(beam_size=2, return_attention=True))
assert t.best.text, t
print("ok", t.best.text)
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok ")
