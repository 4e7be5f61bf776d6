"""The lean decoder step of a GPU set: ``python -m training lean-step BUNDLE [--set cuda]``.

A step that no sentence of its running set asked attention rows for still computes them: in a set with fused
attention, the reported layer's scores again with plain operators (CUDA's MultiHeadAttention kernel returns none),
about a tenth of a batch-1 step's kernels. onnxruntime keeps every node a graph output reads, so the rows cost their
kernels whether the host copies them or not. ``decoder_lean`` (core/graphs.py ``LEAN_STEP``) is the set's decoder
graph without the ``attention`` output, the nodes only it needed and the initializers only those read; its
initializers point into the set's own weights file, as the decoder's do, so the bundle gains a graph, not weights.
The engine on CUDA runs it for the steps where nobody asked (inference/engine.py ``DeviceState.step``). A set with
static steps gets ``static_decoder_lean`` (``STATIC_LEAN``) the same way, replayed by static running sets
(inference/static_state.py).

Exports write it into a GPU set with fused attention (``export --gpu-dtype ...``, the default ``--gpu-attention
fused``); this command adds it to a bundle exported before, or to any set, checks that it gives the full step's
top-k and cache on random inputs, and writes the manifest anew (the other files are untouched).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from core.bundle import GRAPH_FILES, BundleError, read_manifest, set_graphs, write_manifest
from core.graphs import LEAN_STEP, PACKED_STEP_IDS, STATIC_LEAN
from training.export.feeds import random_step_inputs, typed
from training.export.writer import tensor_specs

log = logging.getLogger(__name__)

DROPPED = "attention"


def lean_graph(decoder: Path) -> onnx.ModelProto:
    """The graph at ``decoder`` without its ``attention`` output, the nodes only that output needed and the
    initializers no node reads any more (their external data is not loaded: the references stay as they are)."""
    model = onnx.load(str(decoder), load_external_data=False)
    graph = model.graph
    if DROPPED not in {o.name for o in graph.output}:
        raise BundleError(f"{decoder} has no {DROPPED!r} output: it is not a decoder step of this project")
    kept_outputs = [o for o in graph.output if o.name != DROPPED]
    del graph.output[:]
    graph.output.extend(kept_outputs)
    nodes = list(graph.node)
    while True:  # drop the nodes whose outputs nothing reads, until none is left
        read = {name for node in nodes for name in node.input} | {o.name for o in graph.output}
        alive = [node for node in nodes if any(name in read for name in node.output if name)]
        if len(alive) == len(nodes):
            break
        nodes = alive
    del graph.node[:]
    graph.node.extend(nodes)
    read = {name for node in nodes for name in node.input}
    initializers = [t for t in graph.initializer if t.name in read]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    value_info = [v for v in graph.value_info if v.name in read or any(v.name in n.output for n in nodes)]
    del graph.value_info[:]
    graph.value_info.extend(value_info)
    return model


FP16_ATOL = 0.02
"""How far the lean step's floats may be from the full step's in a set computing in fp16 (``--gpu-dtype fp16``): on
the CPU onnxruntime runs fp16 operators it lacks in fp32 between casts it places by the graph's shape, so a value
may be rounded to fp16 in one graph and not in the other (one fp16 step at the log-probabilities' magnitude,
0.0039, in the tests' tiny model). Sets computing in fp32 (fp32, fp16w) must agree to ``FP32_ATOL``."""
FP32_ATOL = 1e-5


def check_lean(decoder: Path, lean: Path, manifest: dict[str, Any], atol: float, batch: int = 2, hyps: int = 3) -> None:
    """Run both graphs on the CPU on the same random inputs: the lean one must give the full one's outputs (it is
    the same nodes), floats within ``atol`` and the same ids wherever the full step's log-probabilities are further
    than ``2 * atol`` from their neighbours'; BundleError otherwise. Either kind of step: the dynamic one
    (``decoder``) or the static one (``static_decoder``, its step inputs and top-k packed or not)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    full = ort.InferenceSession(str(decoder), options, providers=["CPUExecutionProvider"])
    thin = ort.InferenceSession(str(lean), options, providers=["CPUExecutionProvider"])
    cached = 4
    feeds = random_step_inputs(manifest, batch, hyps, np.random.default_rng(0), source=5, cached=cached)
    if PACKED_STEP_IDS in {i.name for i in full.get_inputs()}:  # the static step: positions below its width
        feeds["positions"] = np.minimum(feeds["positions"], cached - 1)
        packed = (feeds.pop("tokens").reshape(-1), feeds.pop("positions"), feeds.pop("reorder"))
        feeds[PACKED_STEP_IDS] = np.concatenate(packed)
    feeds = typed(feeds, full)
    names = [o.name for o in thin.get_outputs()]
    got = dict(zip(names, thin.run(names, feeds), strict=True))
    want = dict(zip(names, full.run(names, feeds), strict=True))
    if "topk" in want:  # packed: the log-probs, then the ids as floats
        for out in (want, got):
            out["topk_logprobs"], out["topk_ids"] = out["topk"][:, :, 0], out.pop("topk")[:, :, 1]
        names = [n for n in names if n != "topk"] + ["topk_logprobs", "topk_ids"]
    lp = want["topk_logprobs"]
    gaps = np.abs(np.diff(lp, axis=-1))
    apart = np.ones(lp.shape, dtype=bool)  # ranks whose log-probability no neighbour comes near
    apart[..., 1:] &= gaps > 2 * atol
    apart[..., :-1] &= gaps > 2 * atol
    for name in names:
        a, b = want[name], got[name]
        same = np.array_equal(a[apart], b[apart]) if name == "topk_ids" else np.allclose(a, b, rtol=0, atol=atol)
        if not same:
            raise BundleError(f"{lean}: its {name} differs from {decoder}'s; nothing written")


LEAN_OF = {"decoder": LEAN_STEP, "static_decoder": STATIC_LEAN}
"""Each step graph a set may have, and its lean one."""


def add_lean_step(
    bundle: str | Path, graph_set: str = "cuda", *, manifest: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Write ``graph_set``'s lean step beside its decoder and list it in the manifest, and the same for its static
    step where the set has one (``STATIC_LEAN``); returns the entries written, by role. With ``manifest`` (an
    export's, not yet written) the entries go into it and nothing else is written."""
    bundle = Path(bundle)
    written = manifest is None
    manifest = read_manifest(bundle) if manifest is None else manifest
    graphs = set_graphs(manifest, graph_set, bundle)
    variants = manifest.get("variants", {})
    dtype = variants[graph_set]["dtype"] if graph_set in variants else manifest.get("export", {}).get("dtype")
    made: dict[str, Path] = {}
    try:
        for full, role in LEAN_OF.items():
            if full not in graphs:
                continue
            step = bundle / graphs[full]["file"]
            made[role] = lean = step.with_name(GRAPH_FILES[role])
            onnx.save(lean_graph(step), str(lean))
            check_lean(step, lean, manifest, FP16_ATOL if dtype == "fp16" else FP32_ATOL)
            graphs[role] = tensor_specs(lean, bundle)
            if written:
                log.info("wrote %s (%d nodes; %s has %d)", lean, *_nodes(lean), step.name, *_nodes(step))
    except BaseException:  # neither file nor entry of a lean step half made
        for role, lean in made.items():
            lean.unlink(missing_ok=True)
            graphs.pop(role, None)
        raise
    if written:
        write_manifest(bundle, {key: value for key, value in manifest.items() if key != "files"})
    return {role: graphs[role] for role in made}


def _nodes(*paths: Path) -> list[int]:
    return [len(onnx.load(str(p), load_external_data=False).graph.node) for p in paths]
