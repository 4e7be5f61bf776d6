"""onnxruntime's CPU LogSoftmax over masked rows: why the shortlisted step floors its logits before it.

    python -m bench masked-softmax [--shapes 32x3541,128x4458] [--masked 0.6] [--runs 100] [--repeats 5]
                                   [--threads 2] [--out docs/reports/masked-softmax/report]

For each (rows, pieces) shape, one-node graphs run on the same random logits (normal, standard deviation 3) with
``--masked`` of each row's entries masked in these ways, alternated ``--repeats`` times, ``--runs`` calls each:

* ``finite``: nothing masked;
* ``-inf``: masked entries -inf (what session 39's step fed its log-softmax);
* ``max - 60`` / ``max - 100``: masked entries that far below the row's maximum (where onnxruntime's exp turns slow);
* ``floored``: the step's own chain since session 40 (training/export/shortlist.py): the mask added, the row's
  maximum, the logits raised to ``FLOOR`` below it, then the log-softmax;
* ``Where`` and ``Add``: selecting -inf for the masked entries against adding a 0 / -inf mask (no log-softmax).

Prints the median milliseconds a call and writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.loadtools import machine, report_dir, write_report


def _session(nodes: list[Any], inputs: list[Any], threads: int) -> Any:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(
        helper.make_graph(nodes, "masked_softmax", inputs, [out]),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def graphs(threads: int) -> dict[str, tuple[Any, list[str]]]:
    """name -> (session, the inputs it reads among x, mask (0 / -inf), allowed (bool))."""
    from onnx import TensorProto, helper

    from training.export.shortlist import floored as shortlist_floored

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", "n"])
    mask = helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["rows", "n"])
    allowed = helper.make_tensor_value_info("allowed", TensorProto.BOOL, ["rows", "n"])

    def constant(name: str, value: float) -> Any:
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TensorProto.FLOAT, [1], [value]))

    softmax = [helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)]
    floored = [
        *shortlist_floored("x", "mask", "raised", 17),
        helper.make_node("LogSoftmax", ["raised"], ["y"], axis=-1),
    ]
    where = [constant("minus_inf", -np.inf), helper.make_node("Where", ["allowed", "x", "minus_inf"], ["y"])]
    return {
        "LogSoftmax": (_session(softmax, [x], threads), ["x"]),
        "floored": (_session(floored, [x, mask], threads), ["x", "mask"]),
        "Where": (_session(where, [x, allowed], threads), ["x", "allowed"]),
        "Add": (_session([helper.make_node("Add", ["x", "mask"], ["y"])], [x, mask], threads), ["x", "mask"]),
    }


def cases(rows: int, n: int, masked: float, seed: int = 0) -> list[tuple[str, str, dict[str, np.ndarray]]]:
    """(name, graph, feeds) for one shape."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(rows, n)) * 3).astype(np.float32)
    allowed = rng.random((rows, n)) >= masked
    allowed[:, 0] = True  # every row keeps a piece
    mask = np.where(allowed, np.float32(0), np.float32(-np.inf))
    top = x.max(axis=1, keepdims=True)

    def below(gap: float) -> np.ndarray:
        return np.where(allowed, x, top - gap).astype(np.float32)

    return [
        ("finite", "LogSoftmax", {"x": x}),
        ("-inf", "LogSoftmax", {"x": np.where(allowed, x, np.float32(-np.inf))}),
        ("max - 60", "LogSoftmax", {"x": below(60.0)}),
        ("max - 100", "LogSoftmax", {"x": below(100.0)}),
        ("floored", "floored", {"x": x, "mask": mask}),
        ("Where", "Where", {"x": x, "allowed": allowed}),
        ("Add", "Add", {"x": x, "mask": mask}),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--shapes", default="32x3541,128x4458", help="ROWSxPIECES,... (batch 8 and 32 at beam 4)")
    parser.add_argument("--masked", type=float, default=0.6, help="share of each row's entries masked")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(report_dir("masked-softmax") / "report"))
    args = parser.parse_args(argv)

    sessions = graphs(args.threads)
    results: list[dict[str, Any]] = []
    for shape in args.shapes.split(","):
        rows, n = (int(v) for v in shape.lower().split("x"))
        chosen = cases(rows, n, args.masked)
        seconds: dict[str, list[float]] = {name: [] for name, _, _ in chosen}
        for _ in range(args.repeats):
            for name, graph, feeds in chosen:  # alternated
                session, reads = sessions[graph]
                feed = {k: feeds[k] for k in reads}
                for _ in range(3):
                    session.run(None, feed)
                started = time.perf_counter()
                for _ in range(args.runs):
                    session.run(None, feed)
                seconds[name].append((time.perf_counter() - started) / args.runs)
        for name, graph, _ in chosen:
            ms = statistics.median(seconds[name]) * 1e3
            results.append({"rows": rows, "pieces": n, "case": name, "graph": graph, "ms": ms})
            print(f"{rows}x{n} {name:>10} ({graph}): {ms:.3f} ms", flush=True)

    host = machine()
    lines = [
        "# onnxruntime's CPU LogSoftmax over masked rows",
        "",
        f"Generated by `python -m bench masked-softmax` ({host['cpus']} CPUs, {args.threads} threads): random logits, "
        f"{args.masked:.0%} of each row masked, median of {args.repeats} alternated rounds of {args.runs} calls.",
        "",
        "| rows x pieces | case | graph | ms a call |",
        "|---|---|---|---:|",
    ]
    lines += [f"| {r['rows']} x {r['pieces']} | {r['case']} | {r['graph']} | {r['ms']:.3f} |" for r in results]
    write_report(Path(args.out), "\n".join(lines) + "\n", {"machine": host, "masked": args.masked, "results": results})
    print(f"wrote {args.out}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
