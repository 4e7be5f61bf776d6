"""onnxruntime's intra-op threads: a pool per session (onnxruntime's default) or one pool for the whole process.

An engine opens five sessions or more (encoder, decoder step, the small cache graphs, a static step per bucket),
and a server may hold several engines. With a pool per session each has its own worker threads: idle ones must
either sleep, and then every parallel node of a step pays a wake-up (most of a batch-1 step is such tiny nodes),
or spin, and then one session's spinning workers take the cores another session is computing on. One pool
shared by every session has neither cost: it spins between the nodes of a step and no other pool competes with
it. Two runs at once (a server's two batches in flight) do compete for it. Both are measured in
docs/inference-core.md ("One thread pool for the process").

onnxruntime's shared ("global") pools are process-wide and final: once created they cannot be resized, and every
session opened afterwards must use them. So sharing is opt-in (``Engine.load(shared_pool=True)``, the server's
``MT_SHARED_POOL``), and every session this project opens takes its options from `session_options`, which follows
whichever mode the process is in.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from pathlib import Path

import onnxruntime as ort

log = logging.getLogger(__name__)

_lock = threading.Lock()
_shared: int | None = None
"""Threads of the process's shared pool once `share_pool` made it (0: onnxruntime's default, a thread per
physical core); None while sessions have pools of their own."""


def share_pool(threads: int) -> int:
    """Make every session opened from now on in this process share one intra-op pool of ``threads`` threads (0:
    onnxruntime's default, one per physical core). The first call decides the size; a later call with another
    size keeps the first one and says so. Returns the size in force."""
    global _shared
    with _lock:
        if _shared is None:
            try:
                ort.set_global_thread_pool_sizes(max(0, threads), 1)
            except Exception as err:  # someone else in this process made them: use theirs
                log.warning("onnxruntime's shared thread pool already exists (%s); sessions use it as it is", err)
            _shared = max(0, threads)
            log.info("one onnxruntime thread pool for the process: %s intra-op threads", _shared or "default")
        elif threads != _shared:
            log.warning(
                "asked for a shared pool of %s threads, but this process already shares one of %s: keeping it",
                threads or "default",
                _shared or "default",
            )
        return _shared


def shared_pool_size() -> int | None:
    """The shared pool's size (0: onnxruntime's default), or None when sessions have pools of their own."""
    return _shared


def session_options(threads: int = 0, spinning: bool = False) -> ort.SessionOptions:
    """Options for a session of this project: all graph optimizations, one node at a time, errors only in the log.

    In a process that shares one pool the session joins it (``threads`` and ``spinning`` are then the pool's
    business: it spins, onnxruntime's default). Otherwise the session gets a pool of ``threads`` (0:
    onnxruntime's default) whose idle threads sleep unless ``spinning``: several pools spinning on the same
    cores slow each other down 2-6x (docs/bundle.md).
    """
    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if _shared is not None:
        options.use_per_session_threads = False
        return options
    options.intra_op_num_threads = max(0, threads)
    options.inter_op_num_threads = 1
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2's CPU quota: "QUOTA PERIOD" in microseconds, or "max PERIOD" without a limit."""


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity, capped by a cgroup (v2) CPU quota (a container's CPU
    limit, which the affinity does not show)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        quota, period = CGROUP_CPU_MAX.read_text(encoding="ascii").split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)
