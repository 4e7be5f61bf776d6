"""How fast this machine's host runs the engine's Python: the CPU, the interpreter, and the beam search's own cost a
step (bench search-cost's synthetic stepper, this tree alone) at batch 1 and 128.

    PYTHONPATH=. python bench/gpu_session/host_speed.py

Needs only numpy and this tree (no onnxruntime), so `device.sh part 1` runs it on a fresh GPU machine in seconds.
Why: on the H100 of session 42 the search alone took 51 us a step at batch 1 against 12 on the 2-core VM the project
is built on, and 0.646 ms at batch 128 against 0.23 (docs/inference-core.md, session 47); on a GPU the host's work
a step is time the device waits, so whether that host is slow, and by how much, says what host work is worth there.
"""

from __future__ import annotations

import ast
import platform
import statistics
import sys
import sysconfig
import timeit
from pathlib import Path

SEARCH_COST = Path(__file__).resolve().parents[1] / "search_cost.py"


def worker_source() -> str:
    """bench search-cost's WORKER, read from its file: importing the module would import bench.loadtools, whose
    httpx a fresh GPU machine's Python lacks."""
    for node in ast.parse(SEARCH_COST.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "WORKER" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, str)
            return value
    raise SystemExit(f"no WORKER in {SEARCH_COST}")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    configured = sysconfig.get_config_var("CONFIG_ARGS") or ""
    built = [flag for flag in ("--enable-optimizations", "--with-lto") if flag in configured] or ["neither"]
    print(f"cpu: {cpu_model()}; python {sys.version.split()[0]} ({sys.executable}), configured with {' '.join(built)}")
    loop = min(timeit.repeat("sum(i * i for i in range(1000))", number=2000, repeat=5)) / 2000
    print(f"pure Python: {loop * 1e6:.1f} us for sum(i * i for i in range(1000))")
    worker = worker_source().split('print(json.dumps({"ready": tree}), flush=True)')[0]
    argv, sys.argv = sys.argv, ["worker", str(Path(__file__).resolve().parents[2]), ""]
    try:
        space: dict[str, object] = {"__name__": "host_speed"}
        exec(worker, space)  # the bench's own stepper and run loop, this tree's search
    finally:
        sys.argv = argv
    run = space["run"]
    assert callable(run)
    for batch, steps in ((1, 2000), (128, 200)):
        run(batch, 4, 50, 0)  # warm
        per = [run(batch, 4, steps, seed)["seconds"] / steps for seed in range(3)]
        median = statistics.median(per) * 1e3
        print(f"search a step, batch {batch}: {median:.3f} ms (median of 3, bench search-cost's stepper)")


if __name__ == "__main__":
    main()
