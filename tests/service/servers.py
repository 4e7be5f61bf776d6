"""Real uvicorn servers for the tests: in a thread (to reach the app's insides) or a subprocess."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from fastapi import FastAPI

from service.app import create_app
from service.deps import ServiceState
from service.loader import EngineLoader
from service.settings import Settings
from testkit.fake_engine import FakeLoader, write_fake_bundle
from testkit.server import ProcessServer, free_port, process_server

__all__ = [
    "ProcessServer",
    "ThreadServer",
    "free_port",
    "process_server",
    "settings_for",
    "thread_server",
    "two_way_bundles",
    "two_way_server",
    "wait_until",
]

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ThreadServer:
    url: str
    app: FastAPI
    client: httpx.Client

    @property
    def service(self) -> ServiceState:
        service: ServiceState = self.app.state.service
        return service


def wait_until(condition: object, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():  # type: ignore[operator]
                return
        except httpx.TransportError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@contextmanager
def thread_server(settings: Settings, engine_loader: EngineLoader, wait_ready: bool = True) -> Iterator[ThreadServer]:
    app = create_app(settings, engine_loader=engine_loader)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: server.started, what="uvicorn to start")
        with httpx.Client(base_url=url, timeout=30) as client:
            if wait_ready:
                wait_until(lambda: client.get("/readyz").status_code == 200, what="/readyz")
            yield ThreadServer(url, app, client)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def settings_for(bundle: Path, **overrides: object) -> Settings:
    """A test server's settings: short batching wait, then ``overrides`` (conftest clears MT_*)."""
    values: dict[str, object] = {"bundle": bundle, "max_wait_ms": 2.0, **overrides}
    return Settings.model_validate(values)


def two_way_bundles(root: Path) -> list[Path]:
    """Two fake models, en→de and de→en (whose translations start with "en:"), in ``root``."""
    return [
        write_fake_bundle(root / "en-de", name="fake-en-de", languages="en-de"),
        write_fake_bundle(root / "de-en", name="fake-de-en", languages="de-en", prefix="en:"),
    ]


@contextmanager
def two_way_server(root: Path, **overrides: object) -> Iterator[ThreadServer]:
    """A server of the two fake models of ``two_way_bundles`` (the other services' APIs detect and route by
    language)."""
    bundles = two_way_bundles(root)
    with thread_server(settings_for(bundles[0], bundles=bundles, **overrides), FakeLoader()) as running:
        yield running
