"""Every limit is configuration: set through its MT_* variable, enforced with a message naming it.

The same limits set through Settings are tested in tests/service/test_http_errors.py (MT_MAX_TEXTS,
MT_MAX_CHARS, MT_MAX_BODY_BYTES, a full MT_MAX_QUEUE answering 503, MT_REQUEST_TIMEOUT_S); here they
come from the environment of a real ``python -m service`` process, as in a container. A sentence
longer than the model accepts (the bundle's ``max_source_pieces``) is cut and flagged, not refused:
see docs/service.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.fake_engine import write_fake_bundle
from tests.service.servers import ProcessServer, process_server, wait_until

LIMITS = {
    "MT_MAX_TEXTS": "2",
    "MT_MAX_CHARS": "20",
    "MT_MAX_BODY_BYTES": "600",
    "MT_MAX_QUEUE": "3",
    "MT_MAX_ATTENTION_PIECES": "5",
    "MT_REQUEST_TIMEOUT_S": "0.5",
}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessServer]:
    """The fake engine (one word, one piece; 1 s a batch) with every limit small, from the environment."""
    directory = tmp_path_factory.mktemp("limits")
    bundle = write_fake_bundle(directory / "bundle", delay_s=1.0)
    with process_server(["--bundle", str(bundle)], directory / "server.log", fake=True, env=LIMITS) as server:
        wait_until(lambda: server.client.get("/readyz").status_code == 200, what="ready")
        yield server


def refused(server: ProcessServer, body: dict[str, object], status: int, code: str) -> str:
    r = server.client.post("/translate", json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"] == code
    message: str = r.json()["message"]
    return message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"text": ["a", "b", "c"]}, "3 texts; the limit is 2 (MT_MAX_TEXTS)"),
        ({"text": "x" * 21}, "21 characters; the limit is 20 (MT_MAX_CHARS)"),
        ({"text": "a", "padding": "y" * 700}, "larger than 600 bytes (MT_MAX_BODY_BYTES)"),
        ({"text": "a. b. c. d."}, "at least 4 sentences but the queue holds at most 3 (MT_MAX_QUEUE)"),
        ({"text": "a b c d e f", "return_attention": True}, "at most 5 source pieces (MT_MAX_ATTENTION_PIECES)"),
    ],
    ids=["texts", "chars", "body-bytes", "queue", "attention-pieces"],
)
def test_limits_from_the_environment_get_413_naming_the_variable(
    limited: ProcessServer, body: dict[str, object], says: str
) -> None:
    assert says in refused(limited, body, 413, "too_large")


def test_request_timeout_from_the_environment_gets_504_in_time(limited: ProcessServer) -> None:
    started = time.monotonic()
    message = refused(limited, {"text": "a b", "return_attention": True}, 504, "timeout")
    assert "0.5 s (MT_REQUEST_TIMEOUT_S)" in message
    assert time.monotonic() - started < 1.0  # the batch takes 1 s: the answer did not wait for it


def test_a_sentence_longer_than_the_model_accepts_is_translated_in_parts_not_cut_off(
    real_server: ProcessServer, real_bundle: Path, long_word: str
) -> None:
    """A sentence of more pieces than MT_PART_PIECES (default 48) or the bundle's max_source_pieces is cut into parts
    within them at its spaces (core.sentences.fit), each part translated as it would be alone, nothing flagged or
    lost."""
    limit = real_server.client.get("/model").json()["manifest"]["max_source_pieces"]
    words = ["red", "blue", "gold", "navy", "pink", "teal"]
    run_on = " ".join(words[i % len(words)] for i in range(3 * limit))  # one sentence, more pieces than the limit
    body = {"text": ["red blue", run_on, long_word]}
    r = real_server.client.post("/translate", json=body, headers={"X-Request-ID": "fit-1"})
    assert r.status_code == 200, r.text
    short, parts, word = r.json()["translations"]
    assert not any("truncated" in t for t in (short, parts, word))
    wait_until(lambda: '"fit-1"' in real_server.log(), what="the access log line")
    line = next(json.loads(x) for x in real_server.log().splitlines() if '"request_id": "fit-1"' in x)
    assert "truncated_sentences" not in line and line["input_tokens"] >= 3 * limit + 5000
    from core.sentences import PART_PIECES, fit, whole_text
    from core.tokenizer import Tokenizer

    tokenizer, most = Tokenizer(real_bundle), min(PART_PIECES, limit)
    pieces = fit(whole_text(run_on), lambda s: len(tokenizer.encode_source(s)), most)
    assert len(pieces.sentences) >= 3 and all(len(tokenizer.encode_source(s)) <= most for s in pieces.sentences)
    alone = real_server.client.post("/translate", json={"text": pieces.sentences, "split_sentences": False}).json()
    assert parts["text"] == pieces.join([t["text"] for t in alone["translations"]])
