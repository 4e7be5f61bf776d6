"""What a replayed batch-1 decoder step is made of on CUDA: the replay itself, and each read back to the host.

    PYTHONPATH=TREE python bench/gpu_session/replay_floor.py BUNDLE INPUT [--steps N] [--provider cpu]

Session 27 measured a batch-1 static step on an H200 at about 255 us of graph run (``static_state._run``: the replay
and the reads of the top-k and the attention rows) against 42-52 us of host work around it
(bench/gpu_session/static_host.py). This splits the 255 us, decoding INPUT's first sentences one at a time (beam 4)
with the step timed in parts:

- ``replay``: ``run_with_iobinding`` of the captured step (onnxruntime replays the graph and waits for it);
- ``attention read`` and ``top-k read``: each output's copy to the host;
- ``replay again``: the same bound step replayed back to back, N times, nothing read (what the graph costs with no
  host work between replays);
- ``floor``: a one-node graph (an Add on a 4 x 16 tensor), captured and replayed the same way: what onnxruntime's
  run costs on CUDA with next to no kernel time, and with a read of its output.

What is left of ``replay again`` above the floor is the step's kernels: the graph to make smaller (fused attention,
fewer nodes) if batch 1 is to reach 8 ms a sentence (docs/inference-core.md).
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from core.translation import DecodeOptions
from inference import static_state
from inference.engine import Engine


def floor(repeats: int) -> tuple[float, float]:
    """us a replay of a one-Add graph captured on CUDA, without and with a read of its output."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    graph = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "floor", [x], [y], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.enable_mem_pattern = False
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=[("CUDAExecutionProvider", {"enable_cuda_graph": "1"})]
    )
    host = np.zeros((4, 16), np.float32)
    x_value = ort.OrtValue.ortvalue_from_numpy(host, "cuda", 0)
    y_value = ort.OrtValue.ortvalue_from_shape_and_type([4, 16], np.float32, "cuda", 0)
    binding = session.io_binding()
    binding.bind_ortvalue_input("x", x_value)
    binding.bind_ortvalue_output("y", y_value)
    for _ in range(3):  # the first run captures
        session.run_with_iobinding(binding)
    raw, bound = session._sess, binding._iobinding
    times = []
    for read in (False, True):
        started = time.perf_counter()
        for _ in range(repeats):
            raw.run_with_iobinding(bound, None)
            if read:
                y_value.numpy()
        times.append((time.perf_counter() - started) / repeats * 1e6)
    assert float(y_value.numpy()[0, 0]) == 1.0
    return times[0], times[1]


def main(argv: list[str]) -> None:
    bundle, path = argv[0], argv[1]
    again_n = int(argv[argv.index("--steps") + 1]) if "--steps" in argv else 500
    provider = argv[argv.index("--provider") + 1] if "--provider" in argv else "cuda"  # cpu: a smoke test here
    engine = Engine.load(bundle, provider=provider, threads=2, static_step=True)
    with open(path, encoding="utf-8") as lines:
        texts = [line.split("\t")[0] for line in lines if line.strip()][:40]
    parts: dict[str, list[float]] = {"replay": [], "attention read": [], "top-k read": []}
    again: list[float] = []

    def timed_run(bound: Any, attention: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        session = bound.session
        with session.run_lock:
            t0 = time.perf_counter()
            session.run(bound.binding, bound.run_options)
            t1 = time.perf_counter()
            outputs = bound.outputs
            rows = bound.rows.numpy() if attention else None
            t2 = time.perf_counter()
            if len(outputs) == 1:
                topk = outputs[0].numpy()
                result = topk[:, :, 0], topk[:, :, 1].astype(np.int64), rows
            else:
                result = outputs[0].numpy(), outputs[1].numpy(), rows
            t3 = time.perf_counter()
            if measuring and bound.runs and len(again) < 3:  # a warm bucket: its step replayed back to back
                started = time.perf_counter()
                for _ in range(again_n):
                    session.run(bound.binding, bound.run_options)
                again.append((time.perf_counter() - started) / again_n * 1e6)
                session.run(bound.binding, bound.run_options)  # the same inputs: the same outputs again
        if measuring:
            parts["replay"].append(t1 - t0)
            parts["attention read"].append(t2 - t1)
            parts["top-k read"].append(t3 - t2)
        return result

    static_state._run = timed_run  # type: ignore[assignment]
    options = DecodeOptions(beam_size=4)
    measuring = False
    for text in texts:  # the buckets opened and captured
        engine.translate([text], options)
    measuring = True
    for text in texts:
        engine.translate([text], options)
    print(f"batch 1, {len(parts['replay'])} steps of {len(texts)} sentences, us a step (median / mean):")
    for name, values in parts.items():
        print(f"  {name:15s} {statistics.median(values) * 1e6:7.1f} / {statistics.mean(values) * 1e6:7.1f}")
    print(f"  replay again    {', '.join(f'{v:.1f}' for v in again)} ({again_n} replays back to back, nothing read)")
    if provider == "cpu":
        return
    plain, read = floor(2000)
    print(f"  floor           {plain:.1f} a replay of one Add, {read:.1f} with its output read")


if __name__ == "__main__":
    main(sys.argv[1:])
