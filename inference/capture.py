"""Keeping a process's other CUDA work out of the way while onnxruntime captures a CUDA graph.

onnxruntime's CUDA provider captures a graph with ``cudaStreamCaptureModeGlobal`` (its source: "for now cuda graph
can only work with a single thread"). While one stream captures, a synchronous CUDA call from any other thread of
the process (a copy to or from the host, an allocation, another session's run) is an error that also invalidates
the capture. Measured on an H200 with onnxruntime 1.31 (docs/inference-core.md, session 24): the engine alone,
one thread, captured and replayed its static steps; the server, whose two running sets step in two threads,
answered 103 of its requests with 500 and let 63 run past their deadline.

:data:`GATE` is a readers-writer gate over all of a process's device work. Device work enters it shared
(any number of threads at once); a run that may capture a graph enters it exclusive and waits until no other
thread is inside. Shared entries nest in a thread, and an exclusive entry from inside a shared one gives the
thread's shared hold back while it waits (and takes it again after), so a thread never waits on itself. A waiting
capture holds new shared entries back, so a busy server cannot starve it; captures are few (each bucket and ``k``
captures its two graphs once, inference/static_state.py), so the others rarely wait.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class _Thread(threading.local):
    """A thread's own view of a gate."""

    depth = 0
    """its shared entries, nested"""
    exclusive = False
    """inside its own capture"""


class CaptureGate:
    """Shared entries for device work, exclusive ones for graph captures (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._shared = 0  # threads inside shared (a thread counts once, however deep it nests)
        self._capturing = False
        self._waiting = 0  # exclusive entries waiting
        self._local = _Thread()
        self._entry = _Shared(self)
        self.captures = 0
        """Exclusive entries so far (for tests and metrics)."""

    def shared(self) -> _Shared:
        """``with gate.shared():`` around device work (a class, not a generator: it runs several times a step)."""
        return self._entry

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        local = self._local
        if local.exclusive:  # nested in this thread's own capture
            yield
            return
        held = local.depth > 0
        with self._cond:
            if held:  # give this thread's shared hold back while waiting, so two upgrading threads cannot deadlock
                self._shared -= 1
            self._waiting += 1
            while self._capturing or self._shared:
                self._cond.wait()
            self._waiting -= 1
            self._capturing = True
            self.captures += 1
        local.exclusive = True
        try:
            yield
        finally:
            local.exclusive = False
            with self._cond:
                self._capturing = False
                self._cond.notify_all()
                if held:  # the thread's shared hold again; exclusive waiters go first, as for a new entry
                    while self._capturing or self._waiting:
                        self._cond.wait()
                    self._shared += 1


class _Shared:
    """One gate's shared entry: reentrant per thread, counted once per thread."""

    __slots__ = ("gate",)

    def __init__(self, gate: CaptureGate):
        self.gate = gate

    # Every decoder step enters and leaves: the plain lock, not the Condition's Python methods, unless a capture
    # makes this thread wait (on the H100 of session 42 the host's whole work a batch-1 step was ~80 us).
    def __enter__(self) -> None:
        gate = self.gate
        local = gate._local
        depth = local.depth
        local.depth = depth + 1
        if depth or local.exclusive:
            return
        with gate._lock:  # the Condition's own lock
            if not (gate._capturing or gate._waiting):
                gate._shared += 1
                return
        with gate._cond:
            while gate._capturing or gate._waiting:
                gate._cond.wait()
            gate._shared += 1

    def __exit__(self, *exc: object) -> None:
        gate = self.gate
        local = gate._local
        depth = local.depth = local.depth - 1
        if depth or local.exclusive:
            return
        with gate._lock:
            gate._shared -= 1
            if not gate._shared and gate._waiting:
                gate._cond.notify_all()


GATE = CaptureGate()
"""The process's gate: every engine's device work goes through it (engine.py, static_state.py)."""
