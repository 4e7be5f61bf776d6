"""Fixtures for the server's tests; servers themselves come from tests/service/servers.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import ThreadServer, settings_for, thread_server


@pytest.fixture
def fake_bundle(tmp_path: Path) -> Path:
    return write_fake_bundle(tmp_path / "bundle-v1", version="1")


@pytest.fixture
def loader() -> FakeLoader:
    return FakeLoader()


@pytest.fixture
def server(fake_bundle: Path, loader: FakeLoader) -> Iterator[ThreadServer]:
    """A server with default settings on the fake engine."""
    with thread_server(settings_for(fake_bundle), loader) as running:
        yield running


@pytest.fixture(autouse=True)
def _no_mt_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """MT_* variables of whoever runs the tests must not change the servers under test."""
    import os

    for name in [n for n in os.environ if n.startswith("MT_")]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    """One default server for a whole module of tests that only read from it."""
    bundle = write_fake_bundle(tmp_path_factory.mktemp("shared") / "bundle-v1", version="1")
    with thread_server(settings_for(bundle), FakeLoader()) as running:
        yield running
