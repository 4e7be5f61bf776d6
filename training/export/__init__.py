"""Checkpoint -> model bundle, and back.

- ``bundle.export_bundle``: the whole export (``python -m training export``), atomic, parity-checked.
- ``trace``: the encoder and the one-step decoder traced to ONNX, and the small state graphs written directly.
- ``optimize``: fp16 conversion and int8 quantization of traced graphs.
- ``parity``: ONNX Runtime against PyTorch on random and real inputs.
- ``writer``: the manifest and the graphs' tensor specs.
- ``lean``: the decoder step without attention rows (``python -m training lean-step``); ``feeds``: random inputs
  for one decoder step, for checks and benches that run a step graph alone.
- ``import_bundle``: a bundle's weights read back into a checkpoint (``python -m training import-bundle``).
- ``commands``: the two subcommands' arguments (light: the heavy modules load when a command runs).

The names below are importable from ``training.export`` itself; they load on first use, so importing the
package (the CLI does, to list its commands) costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "ExportError": "common",
    "DEFAULT_OPSET": "common",
    "DTYPES": "common",
    "QUANTIZATIONS": "common",
    "TOLERANCES": "common",
    "GPU_VARIANT": "common",
    "export_bundle": "bundle",
    "tensor_specs": "writer",
    "import_bundle": "import_bundle",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
