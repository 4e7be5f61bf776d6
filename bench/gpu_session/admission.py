"""What the static path's own graphs cost a call (``place``, ``grow``, ``compact``: run through ``Engine.run_graph``,
never captured), and where a call's time goes, node by node.

    PYTHONPATH=TREE python bench/gpu_session/admission.py BUNDLE INPUT BATCH [--provider cpu|cuda] [--out OUT.json]

Session 36 on an H200 found a sentence's admission at batch 1 taking 3.3 ms of a 10.6 ms sentence
(``static_host.py``: the static encoder 0.46 ms, the graphs run by ``Engine.run_graph`` 2.9 ms), where the same
``place`` takes 0.25-0.29 ms on the 2-core CPU: a few scatters of small tensors should cost microseconds on a GPU.
This decodes sentences of INPUT (beam 4) in batches of BATCH with static-shape steps (three passes after one that
opens the buckets), then as a server's running set admits (one sentence every other step), and prints each graph's
milliseconds a call. Then, with the inputs of each graph's last call:

- ``as run``: the call as the engine makes it (IO binding, its outputs written into the inputs' buffers), repeated;
- ``own outputs``: the same with outputs onnxruntime allocates (is writing in place the cost?);
- ``profiled``: a session of the same graph opened with onnxruntime's profiler, run the same way; the report lists
  each node's provider and host-side time a call (on CUDA a node's time is its launch, and any copy, allocation
  or sync inside it) against the whole run's, so a slow node, or time outside every node, shows;
- with ``--kernels`` (CUDA, torch installed): the kernels and copies the calls ran on the device, by GPU time a
  call. Session 42 on an H100 found ``place`` at 10 ms a call, 0.3-0.4 of it its nodes' host time: this says how
  much of the rest the device spent.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

ROLES = ("place", "grow", "compact")


def _median_ms(call: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def profile_nodes(path: str) -> dict[str, Any]:
    """Per node (op, provider, mean host-side µs a call) and the mean run, from onnxruntime's profile JSON."""
    events = json.loads(Path(path).read_text(encoding="utf-8"))
    nodes: dict[str, list[float]] = collections.defaultdict(list)
    kinds: dict[str, tuple[str, str]] = {}
    runs = []
    for event in events:
        if event.get("cat") == "Session" and event.get("name") == "model_run":
            runs.append(float(event["dur"]))
        elif event.get("cat") == "Node" and str(event.get("name", "")).endswith("_kernel_time"):
            name = event["name"][: -len("_kernel_time")]
            args = event.get("args", {})
            nodes[name].append(float(event["dur"]))
            kinds[name] = (str(args.get("op_name", "?")), str(args.get("provider", "?")))
    means = {name: statistics.mean(durations) for name, durations in nodes.items()}
    rows = [
        {"node": n, "op": kinds[n][0], "provider": kinds[n][1], "us": us}
        for n, us in sorted(means.items(), key=lambda item: -item[1])
    ]
    run = statistics.mean(runs) if runs else 0.0  # over every run, as the nodes' means are
    return {"run_us": run, "nodes_us": sum(means.values()), "nodes": rows}


def device_kernels(call: Any, repeats: int) -> list[dict[str, Any]]:
    """The CUDA kernels and copies ``repeats`` calls ran, by GPU time a call (torch's profiler; CUPTI sees every
    kernel of the process, onnxruntime's included): whether a graph's milliseconds are the device's work at all."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            call()
    rows = [
        {"name": e.key, "us": e.device_time_total / repeats, "calls": e.count // repeats}
        for e in prof.key_averages()
        if e.device_time_total > 0
    ]
    return sorted(rows, key=lambda row: -row["us"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle")
    parser.add_argument("input")
    parser.add_argument("batch", type=int)
    parser.add_argument("--provider", default="cpu")
    parser.add_argument("--sentences", type=int, default=40, help="at least; twice the batch when larger")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--out")
    parser.add_argument(
        "--kernels",
        action="store_true",
        help="also each graph's CUDA kernels and copies by GPU time (torch's profiler: CUPTI records onnxruntime's)",
    )
    args = parser.parse_args(argv)
    if args.kernels and args.provider != "cuda":
        parser.error("--kernels reads the GPU's kernels: it needs --provider cuda")
    import onnxruntime as ort

    from core.translation import DecodeOptions
    from inference import static_state
    from inference.engine import Engine

    engine = Engine.load(args.bundle, provider=args.provider, threads=2, static_step=True)
    with open(args.input, encoding="utf-8") as lines:
        texts = [line.split("\t")[0] for line in lines if line.strip()][: max(args.sentences, 2 * args.batch)]
    seconds: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    last: dict[str, tuple[dict[str, Any], list[str], dict[str, Any]]] = {}
    run_graph = engine.run_graph

    def timed(role: str, inputs: dict[str, Any], outputs: list[str], cpu: int = 0, bound: Any = None) -> Any:
        started = time.perf_counter()
        out = run_graph(role, inputs, outputs, cpu, bound)
        seconds[role] += time.perf_counter() - started
        calls[role] += 1
        last[role] = (dict(inputs), list(outputs), dict(bound or {}))
        return out

    encode = static_state.EncoderBucket.run

    def encoder_timed(self: Any, src: Any, cuda_graph: bool, into: Any = None) -> None:
        started = time.perf_counter()
        encode(self, src, cuda_graph, into)
        seconds["static encoder"] += time.perf_counter() - started
        calls["static encoder"] += 1

    def summary(label: str, wall: float) -> dict[str, Any]:
        """The graphs' time a call since ``seconds`` and ``calls`` were cleared, printed and returned."""
        per_call = {role: round(seconds[role] / calls[role] * 1e3, 3) for role in calls}
        shares = ", ".join(f"{r} {per_call[r]:.3f} ms x{calls[r]} ({seconds[r] / wall:.0%})" for r in per_call)
        print(f"{label}: {len(texts)} sentences in {wall:.2f} s; a call: {shares}", flush=True)
        return {"seconds": wall, "ms_a_call": per_call, "calls": dict(calls)}

    engine.run_graph = timed  # type: ignore[method-assign]
    options = DecodeOptions(beam_size=4)
    report: dict[str, Any] = {"bundle": args.bundle, "provider": args.provider, "batch": args.batch, "passes": []}
    with mock.patch.object(static_state.EncoderBucket, "run", encoder_timed):  # undone after, whatever happens
        for attempt in range(4):
            seconds.clear()
            calls.clear()
            started = time.perf_counter()
            for start in range(0, len(texts), args.batch):
                engine.translate(texts[start : start + args.batch], options)
            wall = time.perf_counter() - started
            if attempt:  # the first pass opens the buckets
                report["passes"].append(summary(f"batch {args.batch}", wall))
        # As a server's running set admits: one sentence every other step beside the running ones (``place``, since
        # session 36 skipped where an empty set's buffers are its encoder bucket's size).
        seconds.clear()
        calls.clear()
        running, pending, step = engine.running_set(), list(enumerate(texts)), 0
        started = time.perf_counter()
        while pending or running:
            if pending and step % 2 == 0:
                running.admit([(*pending.pop(0), options)])
            running.step()
            step += 1
        report["mid-run"] = summary("admitted mid-run", time.perf_counter() - started)
    graphs: dict[str, Any] = {}
    for role in (r for r in ROLES if r in last):
        inputs, outputs, bound = last[role]
        written = [o.name for o in engine.raw_sessions[role].outputs_meta]
        entry: dict[str, Any] = {
            "as run": _median_ms(functools.partial(run_graph, role, inputs, outputs, 0, bound), args.repeats),
            "own outputs": _median_ms(functools.partial(run_graph, role, inputs, written), args.repeats),
        }
        with tempfile.TemporaryDirectory() as tmp:
            opts = engine.session_options()
            opts.enable_profiling = True
            opts.profile_file_prefix = str(Path(tmp) / role)
            assert engine.encoder_path is not None  # a static engine's graphs lie beside its encoder
            path = engine.encoder_path.parent / f"{role}.onnx"
            session = ort.InferenceSession(str(path), opts, providers=list(engine.providers))
            with mock.patch.dict(engine.raw_sessions, {role: session._sess}):  # the engine's call, this session
                for _ in range(args.repeats):
                    run_graph(role, inputs, outputs, 0, bound)
            entry["profiled"] = profile_nodes(session.end_profiling())
        graphs[role] = entry
        prof = entry["profiled"]
        print(
            f"{role}: as run {entry['as run']:.3f} ms, own outputs {entry['own outputs']:.3f} ms; profiled run "
            f"{prof['run_us']:.0f} us, its nodes {prof['nodes_us']:.0f} us",
            flush=True,
        )
        for row in prof["nodes"][:8]:
            print(f"    {row['us']:8.1f} us  {row['op']:<12} {row['provider']:<24} {row['node']}")
        if args.kernels:
            entry["kernels"] = device_kernels(
                functools.partial(run_graph, role, inputs, outputs, 0, bound), args.repeats
            )
            for row in entry["kernels"][:8]:
                print(f"    {row['us']:8.1f} us a call on the GPU  x{row['calls']:<5} {row['name'][:90]}")
    report["graphs"] = graphs
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
