"""The node counts of a graph set's step graphs: what a replayed step launches, read off the graphs on the CPU.

    PYTHONPATH=. python bench/gpu_session/graph_nodes.py BUNDLE [--set cuda] [--key-layout plain|A,B]

For each step graph of the set (decoder, its lean step, static_decoder, its lean step): its nodes that are not
constants, its Casts, and the nodes left in onnxruntime's optimized graph of the static steps with a batch-1 bucket's
dimensions fixed (the CPU session's, whose own Casts for fp16 operators are not counted), and of those the ones that
are not views (``ALIASES``: a Reshape launches nothing on CUDA): a proxy for the kernels of a replay where no GPU is
at hand (docs/inference-core.md, sessions 44 and 45). On a GPU, ``kernels.py`` counts the kernels.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

import onnx
import onnxruntime as ort

from core.bundle import read_manifest, set_graphs
from core.graphs import KEY_A, KEY_B

STEPS = ("decoder", "decoder_lean", "static_decoder", "static_decoder_lean")
BATCH_1 = {"batch": 1, "hyps": 4, "rows": 4, "src_len": 32, "steps": 32, "packed": 9}
"""A batch-1 bucket of the static path: one slot of four hypotheses, 32 source positions and cache columns."""


ALIASES = ("Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity")
"""Nodes whose output onnxruntime's CUDA provider makes a view of their input: no kernel a replay."""


def optimized_nodes(path: Path, layout: tuple[int, int] = (1, 1)) -> tuple[int, int]:
    """Nodes of onnxruntime's optimized graph (extended level, the CPU provider) with ``BATCH_1`` fixed, less Casts;
    and of those, the ones that are not ``ALIASES``. ``layout``: a decoder-masked static step's key layout
    (core/graphs.py ``KEY_LAYOUT``), which its session fixes too."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    with tempfile.TemporaryDirectory() as scratch:
        options.optimized_model_filepath = str(Path(scratch) / "optimized.onnx")
        for name, value in (*BATCH_1.items(), *zip((KEY_A, KEY_B), layout, strict=True)):
            options.add_free_dimension_override_by_name(name, value)
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        graph = onnx.load(options.optimized_model_filepath, load_external_data=False).graph
    nodes = [node for node in graph.node if node.op_type != "Cast"]
    return len(nodes), sum(1 for node in nodes if node.op_type not in ALIASES)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle")
    parser.add_argument("--set", default="cuda")
    parser.add_argument("--key-layout", default="plain", help="a decoder-masked step's: plain (the CPU's), or A,B")
    args = parser.parse_args(argv)
    manifest = read_manifest(args.bundle)
    graphs = set_graphs(manifest, args.set, args.bundle)
    d_head = int(manifest["architecture"]["d_head"])
    a, b = (1, d_head) if args.key_layout == "plain" else (int(n) for n in args.key_layout.split(","))
    for role in (r for r in STEPS if r in graphs):
        path = Path(args.bundle) / graphs[role]["file"]
        ops = collections.Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)
        line = f"{role}: {sum(ops.values()) - ops['Constant']} nodes besides constants, {ops['Cast']} Casts"
        if role.startswith("static"):
            nodes, kernels = optimized_nodes(path, (a, b))
            line += f"; optimized with a batch-1 bucket fixed: {nodes} nodes besides Casts, {kernels} besides views"
        print(line, flush=True)


if __name__ == "__main__":
    main()
