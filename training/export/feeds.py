"""Random inputs for one decoder step of a bundle's graphs, for checks and benches that run a step graph alone
(training/export/lean.py, bench/attention.py, bench/gpu_session/lean_step.py). numpy only: no torch."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.graphs import KEY_LAYOUT


def random_step_inputs(
    manifest: dict[str, Any], batch: int, hyps: int, rng: np.random.Generator, *, source: int = 25, cached: int = 20
) -> dict[str, np.ndarray]:
    """Random inputs for one decoder step of a bundle's graphs (decoder.onnx or its lean step): ``batch`` sentences
    of ``hyps`` hypotheses at different positions up to ``cached`` (so that the cache mask works), ``source`` source
    positions, ``k`` = 2 * hyps; floats in float32 (``typed`` fits them and ``k`` to a session)."""
    arch = manifest["architecture"]
    heads, d_head, layers = arch["n_heads"], arch["d_model"] // arch["n_heads"], arch["decoder_layers"]
    rows = batch * hyps
    feeds: dict[str, np.ndarray] = {
        "tokens": rng.integers(4, arch["vocab_size"], (batch, hyps)),
        "positions": rng.integers(1, cached + 1, batch),
        "reorder": rng.permutation(rows).astype(np.int64),
        "k": np.array([2 * hyps], dtype=np.int64),
        "src_mask": np.zeros((batch, source), dtype=bool),
    }
    for i in range(layers):
        for name, size, width in (("cross", batch, source), ("past", rows, cached)):
            for kv in "kv":
                feeds[f"{name}_{kv}_{i}"] = rng.standard_normal((size, heads, width, d_head), dtype=np.float32)
    return feeds


def typed(feeds: dict[str, np.ndarray], sess: Any) -> dict[str, np.ndarray]:
    """The random float inputs in the graph's float type (fp16 graph sets take fp16 memory), ``k`` in the shape
    the graph takes (a scalar in exports before 2026-11-26), and a plain ``KEY_LAYOUT`` where the graph takes one."""
    inputs = {i.name: i for i in sess.get_inputs()}
    out = {k: v.astype(np.float16) if inputs[k].type == "tensor(float16)" else v for k, v in feeds.items()}
    if "k" in out:
        out["k"] = out["k"].reshape([int(d) for d in inputs["k"].shape])
    if KEY_LAYOUT in inputs and "past_k_0" in out:  # a decoder-masked static step's key caches: plain, the CPU's
        out[KEY_LAYOUT] = np.zeros((1, out["past_k_0"].shape[3]), dtype=np.uint8)
    return out
