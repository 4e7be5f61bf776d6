"""A static bundle's ``place`` graph as today's export writes it:
``python -m training place-graph BUNDLE [--set cuda]``.

``place`` writes new sentences' memory (the encoder's mask and cross-attention keys and values) into free slots of a
static running set's buffers, where they lie (inference/static_state.py). Bundles exported before session 42 index
its ScatterNDs by slot only; onnxruntime's CUDA ScatterND gives each index one thread, which copies the index's
whole slice alone (``onnxruntime/core/providers/cuda/tensor/scatter_nd_impl.cu``: "Parallelize on number of
indices"), so a slot's heads x width x d_head values went one at a time: 10 ms a call on an H100 (session 42,
docs/inference-core.md), where its nodes' launches took 0.3 ms. Today's graph indexes every position of every head,
and a thread copies d_head values. The command rebuilds the graph from the bundle's own encoder and architecture,
checks that it writes what the old one wrote on random inputs (bit for bit: it only copies), and replaces the file
and its manifest entry; nothing else changes.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from core.bundle import BundleError, read_manifest, set_graphs, write_manifest
from training.export.trace import sized_state_graph
from training.export.writer import tensor_specs

log = logging.getLogger(__name__)

SHAPES = ((1, 1, 16, 16), (8, 3, 32, 17), (16, 4, 64, 64))
"""(set slots, new sentences, the set's source width, the new sentences' width) the check runs"""


def place_inputs(session: ort.InferenceSession, shape: tuple[int, int, int, int], seed: int = 0) -> dict[str, Any]:
    """Random inputs of a ``place`` graph: a set of ``slots`` of ``width`` positions, ``new`` sentences of ``short``
    positions, and distinct slots for them."""
    slots, new, width, short = shape
    rng = np.random.default_rng(seed)
    feeds: dict[str, Any] = {"slots": rng.permutation(slots)[:new].astype(np.int64)}
    for meta in session.get_inputs():
        if meta.name == "slots":
            continue
        fresh = meta.name.startswith("new_")
        # the first axis the sentences, the one other free axis their source positions
        dims = [new if fresh else slots] + [
            d if isinstance(d, int) else short if fresh else width for d in meta.shape[1:]
        ]
        if meta.type == "tensor(bool)":
            feeds[meta.name] = rng.random(dims) < 0.5
        else:
            dtype = np.float16 if meta.type == "tensor(float16)" else np.float32
            feeds[meta.name] = rng.standard_normal(dims).astype(dtype)
    return feeds


def check_place(old: Path | bytes, new: Path | bytes) -> None:
    """Raise BundleError unless ``new`` writes what ``old`` writes on random inputs of every ``SHAPES``."""
    cpu = ["CPUExecutionProvider"]
    a = ort.InferenceSession(old if isinstance(old, bytes) else str(old), providers=cpu)
    b = ort.InferenceSession(new if isinstance(new, bytes) else str(new), providers=cpu)
    for seed, shape in enumerate(SHAPES):
        feeds = place_inputs(a, shape, seed)
        for meta, x, y in zip(a.get_outputs(), a.run(None, feeds), b.run(None, feeds), strict=True):
            if x.shape != y.shape or not np.array_equal(x, y):
                raise BundleError(f"the rebuilt place graph writes another {meta.name} at {shape}: nothing replaced")


def rewrite_place(bundle: str | Path, graph_set: str = "cuda") -> dict[str, Any]:
    """Rebuild ``graph_set``'s place graph with today's export; returns what was done (``replaced``: False where the
    graph already was today's)."""
    bundle = Path(bundle)
    manifest = read_manifest(bundle)
    graphs = set_graphs(manifest, graph_set, bundle)
    if "place" not in graphs:
        raise BundleError(f"{bundle}'s {graph_set} set has no static-shape step (export --static-step): no place graph")
    path = bundle / graphs["place"]["file"]
    arch = manifest["architecture"]
    encoder = onnx.load(str(bundle / graphs["encoder"]["file"]), load_external_data=False)
    rebuilt = sized_state_graph(
        "place", encoder, int(arch["decoder_layers"]), int(arch["n_heads"]), int(arch["d_head"])
    ).SerializeToString()
    done = {"file": graphs["place"]["file"], "set": graph_set, "replaced": False}
    if rebuilt == path.read_bytes():
        return done
    check_place(path, rebuilt)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".place-", suffix=".onnx", delete=False) as staged:
        staged.write(rebuilt)
    Path(staged.name).replace(path)  # same disk: atomic
    graphs["place"] = tensor_specs(path, bundle)
    write_manifest(bundle, {key: value for key, value in manifest.items() if key != "files"})
    log.info("rewrote %s (%d nodes)", path, len(onnx.load(str(path)).graph.node))
    return {**done, "replaced": True}
