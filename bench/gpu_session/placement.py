"""Where onnxruntime's CUDA provider puts each node of a bundle's GPU graphs, and the copies it adds.

    python bench/gpu_session/placement.py BUNDLE [--graphs cuda] [--out OUT.json]

On CUDA, onnxruntime runs shape computations (Shape, Gather on shapes, Range, ...) on the CPU and inserts
MemcpyToHost / MemcpyFromHost nodes where a tensor crosses; each crossing in the decoder step is a copy and a
stream sync per step. This loads each graph on CUDA with verbose logging, saves the optimized graph, and reports
its op counts, the Memcpy nodes and the nodes the log says were placed on the CPU. Needs a GPU. A bundle exported
with ``--static-step`` also has static_decoder, opened as the engine opens it (free dimensions fixed, here at
32 sentences, beam 4, 32 source positions and 32 cache columns): for CUDA graph capture it must have no node on
the CPU and no Memcpy.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import tempfile
from pathlib import Path


def placements(log: str) -> tuple[dict[str, int], dict[str, list[str]]]:
    """(node count, node list) by provider from onnxruntime's verbose "Node placements" log: "All nodes placed on
    [EP]. Number of nodes: N" when one provider has them all; else per provider "Node(s) placed on [EP]. Number
    of nodes: N" and one line per node ("Op (name)"), all from VerifyEachNodeIsAssignedToAnEp."""
    counts: dict[str, int] = {}
    nodes: dict[str, list[str]] = {}
    current = None
    for line in log.splitlines():
        _, marker, rest = line.partition("VerifyEachNodeIsAssignedToAnEp]")
        if not marker:
            continue
        header = re.search(r"placed on \[(\w+)\]\. Number of nodes: (\d+)", rest)
        if header:
            current = header.group(1)
            counts[current] = int(header.group(2))
            nodes.setdefault(current, [])
        elif current and rest.startswith("   ") and rest.strip():
            nodes[current].append(rest.strip())
    return counts, nodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle")
    parser.add_argument("--graphs", default="cuda", help="cuda (the GPU variant) or main")
    parser.add_argument("--out")
    parser.add_argument(
        "--provider", default="cuda", help="cuda, or cpu to count the optimized nodes where no GPU is (no placement)"
    )
    args = parser.parse_args()
    import onnx
    import onnxruntime as ort

    folder = Path(args.bundle) / ("cuda" if args.graphs == "cuda" else "")
    report: dict[str, object] = {"onnxruntime": ort.__version__, "graphs": {}}
    roles = ["encoder", "decoder", "merge", "select", "trim"]
    roles += [role for role in ("static_decoder", "place") if (folder / f"{role}.onnx").exists()]
    fixed = {"batch": 32, "hyps": 4, "rows": 128, "src_len": 32, "steps": 32, "packed": 2 * 128 + 32}
    for role in roles:
        with tempfile.TemporaryDirectory() as tmp:
            options = ort.SessionOptions()
            if role == "static_decoder":
                for name, size in fixed.items():
                    options.add_free_dimension_override_by_name(name, size)
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
            options.log_severity_level = 0
            log = Path(tmp) / "log.txt"
            saved = os.dup(2)
            with open(log, "w") as sink:  # onnxruntime logs to the process's stderr
                os.dup2(sink.fileno(), 2)
                try:
                    provider = "CUDAExecutionProvider" if args.provider == "cuda" else "CPUExecutionProvider"
                    ort.InferenceSession(str(folder / f"{role}.onnx"), options, providers=[provider])
                finally:
                    os.dup2(saved, 2)
            graph = onnx.load(str(Path(tmp) / "optimized.onnx"), load_external_data=False).graph
            text = log.read_text(errors="replace")
        ops = collections.Counter(n.op_type for n in graph.node)
        counts, placed = placements(text)
        entry = {
            "nodes": len(graph.node),
            "memcpy": {op: ops[op] for op in ("MemcpyToHost", "MemcpyFromHost") if ops[op]},
            "by_provider": counts,
            "on_cpu": placed.get("CPUExecutionProvider", []),
            "ops": dict(ops.most_common()),
        }
        report["graphs"][role] = entry  # type: ignore[index]
        print(f"{role}: {entry['nodes']} nodes, memcpy {entry['memcpy'] or 'none'}, by provider {entry['by_provider']}")
        for node in entry["on_cpu"][:16]:  # type: ignore[index]
            print("    on the CPU:", node)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
