"""What every part of the export shares: its error and its settings."""

from __future__ import annotations

DEFAULT_OPSET = 17  # first opset with LayerNormalization; onnxruntime >= 1.14 runs it
DTYPES = ("fp32", "fp16")
GPU_DTYPES = (*DTYPES, "fp16w")
"""``--gpu-dtype`` also takes fp16w: fp32 graphs whose weights are stored as fp16 (half the file), widened
once when onnxruntime loads them (constant folding of their Cast nodes), so they compute in fp32."""
QUANTIZATIONS = (
    "none",
    "int8",
    "int8-channel",
    "int8-channel-fp32-logits",
    "int8-static",
    "int8-static-fp32-logits",
)
"""int8-channel-fp32-logits: int8-channel with the output projection (the logits product) left in fp32.
int8-static: one weight scale per output column and one input scale per product, calibrated at export on real
sentences (training/export/static_int8.py), so that a sentence translates the same alone and batched."""
CALIBRATION_SENTENCES = 256
"""int8-static: sentences translated to calibrate the input scales (drawn from the file, seeded)."""
# Largest |ONNX - PyTorch| accepted at export, by what the graphs hold. fp32 differs only by the order of
# float operations; fp16 and int8 change the weights themselves (measured figures in docs/bundle.md).
TOLERANCES = {"fp32": 1e-3, "fp16": 0.1, "fp16w": 0.1, "int8": 1.0}
ATTENTION_KINDS = ("fused", "plain")
"""``--attention``: fused (onnxruntime's MultiHeadAttention and SkipLayerNormalization kernels, the default) or
plain (standard ONNX operators only, for runtimes other than onnxruntime)."""
STATIC_ATTENTION = ("multihead", "decoder-masked")
"""``--static-attention``: how a fused static step attends to its own cache (``export_bundle``)."""
GPU_VARIANT = "cuda"
"""Where ``--gpu-dtype`` puts a second set of graphs, and its key in the manifest's ``variants``."""


class ExportError(ValueError):
    """The checkpoint cannot be exported as asked; the message names the value and the fix."""
