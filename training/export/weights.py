"""One weight file per graph set: every weight the set's graphs share is stored once (ONNX external data).

The encoder and the decoder step both hold the token embedding (tied: 8 MB in fp32), and the static decoder step
(``--static-step``) holds every weight of the dynamic one. Stored inside each graph they would be written two or
three times, which the 60 MB bundle cap cannot afford. `share_weights` moves each set's large initializers into
one file beside its graphs, ``weights.bin``, a tensor once however many graphs use it, and points the graphs at
it (an initializer's ``external_data``: file, offset, length). onnxruntime and ``onnx.load`` read it from the
graph's own directory, so loading a graph is unchanged; the manifest lists the file and its sha256 like any other.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
from onnx import numpy_helper

WEIGHTS_FILE = "weights.bin"
ALIGN = 4096
"""Each tensor starts on a page boundary, so that onnxruntime can map it rather than read it."""
MIN_BYTES = 1024
"""Smaller initializers (shapes, scalars, biases of a few values) stay inside their graph."""


def share_weights(directory: Path, files: list[str], name: str = WEIGHTS_FILE) -> dict[str, int]:
    """Move the initializers of ``files`` (graphs in ``directory``) of at least MIN_BYTES into ``directory/name``,
    each distinct tensor (element type, shape and bytes) once. Returns the bytes the graphs held before, the
    bytes of the weight file, and the bytes saved."""
    models = {file: onnx.load(str(directory / file)) for file in files}
    offsets: dict[tuple[int, tuple[int, ...], str], tuple[int, int]] = {}
    held = 0
    with open(directory / name, "wb") as out:
        for model in models.values():
            for tensor in model.graph.initializer:
                data = tensor.raw_data or numpy_helper.to_array(tensor).tobytes()
                if len(data) < MIN_BYTES:
                    continue
                held += len(data)
                key = (tensor.data_type, tuple(tensor.dims), hashlib.sha256(data).hexdigest())
                if key not in offsets:
                    start = -out.tell() % ALIGN
                    out.write(b"\0" * start)
                    offsets[key] = (out.tell(), len(data))
                    out.write(data)
                offset, length = offsets[key]
                tensor.ClearField("raw_data")
                for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
                    tensor.ClearField(field)
                tensor.data_location = onnx.TensorProto.EXTERNAL
                del tensor.external_data[:]
                for k, v in (("location", name), ("offset", str(offset)), ("length", str(length))):
                    entry = tensor.external_data.add()
                    entry.key, entry.value = k, v
        written = out.tell()
    for file, model in models.items():
        onnx.save(model, str(directory / file))
    return {"held": held, "written": written, "saved": held - written}
