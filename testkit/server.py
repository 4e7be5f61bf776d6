"""``python -m service`` (or the fake-engine variant) in a subprocess on 127.0.0.1: the one harness the tests
and the benchmarks start real servers with."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ProcessServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    client: httpx.Client
    """One client for the server's lifetime (creating one costs ~0.1 s)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)


@contextmanager
def process_server(
    args: list[str],
    log_path: Path,
    *,
    fake: bool = False,
    env: dict[str, str] | None = None,
    ready: bool = False,
    timeout_s: float = 30.0,
    graceful: bool = False,
) -> Iterator[ProcessServer]:
    """Start the server with ``args`` on a free port and yield once it answers ``/healthz`` (``ready``: once
    ``/readyz`` says every model is loaded). ``fake``: the fake engine (testkit.fake_engine). The environment's
    ``MT_*`` settings are dropped, ``env`` added. At the end the server is killed, or with ``graceful``
    stopped by SIGTERM (it drains) and killed only if it does not exit within 30 s."""
    port = free_port()
    module = "testkit.fake_server" if fake else "service"
    command = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(port), *args]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MT_")}
    path = [str(ROOT), *filter(None, [environment.get("PYTHONPATH")])]  # the caller's path stays (wheels beside)
    environment.update({"PYTHONPATH": os.pathsep.join(path), **(env or {})})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    server = ProcessServer(url, process, log_path, httpx.Client(base_url=url, timeout=30))
    probe = "/readyz" if ready else "/healthz"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited with {process.returncode}:\n{server.log()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer {probe} within {timeout_s:g} s:\n{server.log()[-4000:]}")
            try:
                if server.client.get(probe, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        yield server
    finally:
        server.client.close()
        if process.poll() is None:
            if graceful:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
            else:
                process.kill()
            process.wait(timeout=10)
