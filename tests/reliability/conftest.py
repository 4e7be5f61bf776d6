"""Fixtures of the reliability tests: real servers (``python -m service``) on 127.0.0.1.

``real_server`` serves the tiny bundle of tests/conftest.py (onnxruntime, built once per session);
the tests that need it skip, saying why, only when that bundle cannot be built. The fake engine of
testkit/fake_engine.py serves the tests that need a slow or failing engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.tokenizer import Tokenizer
from tests.service.servers import ProcessServer, process_server, wait_until

ADMIN_TOKEN = "reliability-admin"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
API_KEY = "reliability-key"
KEY = {"X-API-Key": API_KEY}


@pytest.fixture(autouse=True)
def _no_mt_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """MT_* variables of whoever runs the tests must not change the servers under test."""
    for name in [n for n in os.environ if n.startswith("MT_")]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def real_bundle(request: pytest.FixtureRequest) -> Path:
    """The tiny bundle; RELIABILITY_BUNDLE=DIR serves DIR instead (to iterate without a rebuild)."""
    given = os.environ.get("RELIABILITY_BUNDLE")
    if given:
        return Path(given)
    try:
        import inference.engine  # noqa: F401
    except ImportError as err:
        pytest.skip(f"inference.engine cannot be imported: {err}")
    try:
        bundle = request.getfixturevalue("tiny_bundle")
    except (Exception, pytest.fail.Exception) as err:  # its build failed (or timed out)
        pytest.skip(f"the tiny_bundle fixture could not be built: {type(err).__name__}: {err}")
    return Path(bundle)


@pytest.fixture(scope="session")
def real_server(real_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessServer]:
    """The tiny bundle on one inference thread, limits at their defaults but texts and queue raised
    (so that thousands of tiny texts fit in one request), the translation cache off, an API key and admin reload
    enabled. Its client sends the API key."""
    log = tmp_path_factory.mktemp("reliability") / "real-server.log"
    args = ["--bundle", str(real_bundle), "--provider", "cpu", "--threads", "1", "--max-wait-ms", "5"]
    args += ["--max-texts", "3000", "--max-queue", "4096", "--request-timeout-s", "30"]
    args += ["--cache-mb", "0"]  # thousands of repeated tiny texts must cost their decoding, not cache lookups
    with process_server(args, log, env={"MT_ADMIN_TOKEN": ADMIN_TOKEN, "MT_API_KEY": API_KEY}) as server:
        server.client.headers.update(KEY)
        wait_until(lambda: server.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        yield server


@pytest.fixture(scope="session")
def long_word(real_bundle: Path) -> str:
    """One word of at least 5,000 pieces within MT_MAX_CHARS: single letters the vocabulary does
    not merge (an unknown character would not do: a run of them is one unk piece)."""
    tokenizer = Tokenizer(real_bundle)
    for pair in ("ab", "ae", "ld", "kc", "rl"):
        word = pair * 2500
        if len(tokenizer.source_pieces(word)) >= 5000:
            return word
    pytest.fail("no 5,000-piece word of 5,000 characters in this vocabulary")
