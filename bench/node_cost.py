"""What one more node costs a call on onnxruntime's CPU provider: small graphs with N nodes more, side by side.

    python -m bench node-cost [--nodes 20] [--rows 4] [--threads 2] [--calls 5000] [--repeats 5]
                              [--out docs/reports/node-cost/report]

A decoder step of the default model is ~100 nodes once onnxruntime has optimized it, a quarter of them shape work
(Shape, Gather, Unsqueeze, Concat, Reshape) on a few integers. Whether taking such nodes out is worth a change of the
export depends on what a node costs a call when its work is nothing. Each graph here takes a (rows, 256) float input
(a batch-1 step's hidden state at beam 4): ``add`` is a chain of elementwise Adds (kernels that touch the data),
``shape`` a chain of the shape work a traced dynamic reshape leaves (Shape, Gather, Unsqueeze, Concat feeding a
Reshape), each against the same graph with one link. Sessions as the engine opens them (all optimizations, one
intra-op pool of ``--threads`` that spins); the calls of each graph alternate with the others', a figure is the
median over the repeats of the mean call. Prints a table; writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.loadtools import machine, report_dir, write_report

WIDTH = 256


def graph(kind: str, links: int) -> bytes:
    """A model of ``links`` links of ``kind`` on x (rows, WIDTH); every link's output is used."""
    from onnx import TensorProto, helper

    nodes, outputs = [], []
    constants = [
        helper.make_tensor("axis0", TensorProto.INT64, [1], [0]),
        helper.make_tensor("flat", TensorProto.INT64, [2], [-1, WIDTH]),
    ]
    previous = "x"
    for i in range(links):
        if kind == "add":
            nodes.append(helper.make_node("Add", [previous, previous], [f"y{i}"]))
        elif kind == "shape":
            nodes += [
                helper.make_node("Shape", [previous], [f"s{i}"]),
                helper.make_node("Gather", [f"s{i}", "axis0"], [f"g{i}"], axis=0),
                helper.make_node("Unsqueeze", [f"g{i}", "axis0"], [f"u{i}"]),
                helper.make_node("Concat", [f"u{i}", f"u{i}"], [f"c{i}"], axis=0),
                helper.make_node("Reshape", [previous, "flat"], [f"y{i}"]),
            ]
            outputs.append(helper.make_tensor_value_info(f"c{i}", TensorProto.INT64, None))
        else:
            raise ValueError(kind)
        previous = f"y{i}"
    outputs.insert(0, helper.make_tensor_value_info(previous, TensorProto.FLOAT, None))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, WIDTH])
    model = helper.make_model(
        helper.make_graph(nodes, kind, [x], outputs, constants),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    return bytes(model.SerializeToString())


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    import onnxruntime as ort

    from inference.threads import session_options

    x = np.random.default_rng(0).standard_normal((args.rows, WIDTH)).astype(np.float32)
    sessions = {}
    for kind in ("add", "shape"):
        for links in (1, 1 + args.nodes):
            options = session_options(args.threads, spinning=True)
            model = graph(kind, links)
            sessions[kind, links] = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    times: dict[tuple[str, int], list[float]] = {key: [] for key in sessions}
    for session in sessions.values():  # warm
        for _ in range(200):
            session.run(None, {"x": x})
    for _ in range(args.repeats):
        for key, session in sessions.items():
            started = time.perf_counter()
            for _ in range(args.calls):
                session.run(None, {"x": x})
            times[key].append((time.perf_counter() - started) / args.calls * 1e6)
    rows = []
    for kind, per_link in (("add", 1), ("shape", 5)):
        one, more = times[kind, 1], times[kind, 1 + args.nodes]
        extra = [b - a for a, b in zip(one, more, strict=True)]
        rows.append(
            {
                "kind": kind,
                "one_link_us": statistics.median(one),
                "more_links_us": statistics.median(more),
                "extra_nodes": args.nodes * per_link,
                "extra_us": statistics.median(extra),
                "per_node_us": statistics.median(extra) / (args.nodes * per_link),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=20, help="links more in the longer graph of each kind")
    parser.add_argument("--rows", type=int, default=4, help="rows of the input (beam x batch)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=5000, help="calls a graph a repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(report_dir("node-cost") / "report"))
    args = parser.parse_args(argv)
    rows = measure(args)
    host = machine()
    lines = [
        "# What one more node costs a call",
        "",
        f"Generated by `python -m bench node-cost --nodes {args.nodes} --rows {args.rows} --threads {args.threads} "
        f"--calls {args.calls} --repeats {args.repeats}` ({host['cpus']} CPUs, load "
        f"{host['load_average_1m_at_start']}): input ({args.rows}, {WIDTH}) float32, one spinning pool of "
        f"{args.threads} threads a session, median over {args.repeats} alternated repeats of the mean call.",
        "",
        "| chain | one link, µs a call | more links, µs a call | nodes more | µs more | µs a node |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kind']} | {r['one_link_us']:.1f} | {r['more_links_us']:.1f} | {r['extra_nodes']} | "
            f"{r['extra_us']:.1f} | {r['per_node_us']:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    write_report(Path(args.out), text, {"machine": host, "args": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
