"""Stack samples of every Python process started with this directory on PYTHONPATH and ``STACK_SAMPLES`` set (not an
``MT_`` name: the bench's servers start without those), for machines where py-spy cannot attach (session 42's GPU
machine). A thread of the process's own takes every thread's
current stack (``sys._current_frames``) every ``STACK_SAMPLES_PERIOD`` seconds (default 0.005), from
``STACK_SAMPLES_DELAY`` seconds after the process starts (default 0) for ``STACK_SAMPLES_FOR`` seconds (default
30), then writes them in py-spy's raw form (``thread;frame;...;frame count``, a frame ``function (dir/file)``) to
``STACK_SAMPLES`` with ``{pid}`` replaced by the pid: ``python bench/gpu_session/stacks.py FILE...`` sums them.
The sampler needs the GIL to look, so it samples when the interpreter hands the GIL over: a thread that waits for
the GIL, or runs C code without it (onnxruntime, a socket), shows where it waits. (The standard library's
``faulthandler.dump_traceback_later`` reads other threads' frames without the GIL, and crashed a server here.)
Diagnostics only: nothing in service/ or inference/ imports this.
"""

from __future__ import annotations

import os


def _sample(path: str, delay: float, period: float, duration: float) -> None:
    import collections
    import sys
    import threading
    import time

    time.sleep(delay)
    me = threading.get_ident()
    counts: collections.Counter[str] = collections.Counter()
    until = time.monotonic() + duration
    while time.monotonic() < until:
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            stack = []
            while frame is not None:
                code = frame.f_code
                stack.append(f"{code.co_name} ({'/'.join(code.co_filename.split('/')[-2:])})")
                frame = frame.f_back
            counts[";".join([f"pid {os.getpid()} {names.get(ident, ident)}", *reversed(stack)])] += 1
        time.sleep(period)
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(f"{stack} {count}\n" for stack, count in counts.items())


if os.environ.get("STACK_SAMPLES"):
    import threading

    threading.Thread(
        target=_sample,
        args=(
            os.environ["STACK_SAMPLES"].replace("{pid}", str(os.getpid())),
            float(os.environ.get("STACK_SAMPLES_DELAY", "0")),
            float(os.environ.get("STACK_SAMPLES_PERIOD", "0.005")),
            float(os.environ.get("STACK_SAMPLES_FOR", "30")),
        ),
        name="stack-sampler",
        daemon=True,
    ).start()
