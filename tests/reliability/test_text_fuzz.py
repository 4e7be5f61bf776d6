"""Hostile text for POST /translate on a real uvicorn serving the tiny bundle.

Hypothesis mixes control characters, emoji, right-to-left text and bidi controls, mixed scripts,
whitespace and half surrogate pairs (sent as JSON escapes, as a JavaScript client would); fixed
cases cover sizes: 100k characters, a single 5,000-piece word, thousands of tiny texts. Every answer
must be a documented 200, 413 or 422 (never a 5xx, never a hang), valid Unicode must be translated
(200), and /healthz must answer while the big requests run. The server has MT_MAX_TEXTS=3000 and
MT_MAX_QUEUE=4096 (tests/reliability/conftest.py) so that thousands of texts fit in one request.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.service.servers import ProcessServer

JSON = {"Content-Type": "application/json"}
WORDS = ["red", "blue", "green", "gold", "navy", "plum"]
CONTROL = [chr(c) for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]] + [
    "\u00ad",  # soft hyphen
    "\u200b",  # zero-width space
    "\u200d",  # zero-width joiner
    "\u2028",  # line separator
    "\u2029",  # paragraph separator
    "\ufeff",  # byte order mark
    "\ufffe",  # a noncharacter
    "\U0010ffff",  # the last code point
]
EMOJI = ["😀", "👩‍👩‍👧", "🇩🇪", "👍🏽", "🏳️‍🌈", "❤️", "🧑🏿‍🚀"]
RTL = ["مرحبا بالعالم", "שלום עולם", "\u202e", "\u202b", "\u200f", "\u2067", "\u2069", "ی"]
SCRIPTS = ["中文字符", "русский", "ελληνικά", "हिन्दी", "日本語のテキスト", "한국어", "ไทย", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "Z̴̡a̸l̷g̶o̵"]
SPACE = [" ", "\n", "\t", "\r\n", "\u00a0", "\u3000", "\n\n", ". ", "! ", "? "]
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d"]  # halves of a pair, alone

piece = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(CONTROL),
    st.sampled_from(EMOJI),
    st.sampled_from(RTL),
    st.sampled_from(SCRIPTS),
    st.sampled_from(SPACE),
    st.text(max_size=8),  # any valid Unicode (hypothesis leaves surrogates out)
)
valid_text = st.lists(piece, max_size=40).map("".join)
hostile_text = st.lists(st.one_of(piece, st.sampled_from(SURROGATES)), max_size=40).map("".join)


def post(server: ProcessServer, body: bytes, timeout: float = 60) -> httpx.Response:
    """Send raw bytes (the tests build the JSON themselves, escapes and all)."""
    return server.client.post("/translate", content=body, headers=JSON, timeout=timeout)


def encode(payload: dict[str, Any], ascii_only: bool) -> bytes:
    """JSON bytes; with ``ascii_only`` every non-ASCII character is an escape (so half surrogate pairs
    travel as ``\\udXXX``), else raw UTF-8 where valid."""
    text = json.dumps(payload, ensure_ascii=ascii_only)
    return text.encode("utf-8", "surrogatepass" if not ascii_only else "strict")


def has_lone_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def check_answer(r: httpx.Response, texts: list[str]) -> None:
    """A documented answer: 200 with one translation per text, or a JSON 413/422; never anything else."""
    assert r.status_code in (200, 413, 422), r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    if r.status_code == 200:
        assert len(body["translations"]) == len(texts)
        for t in body["translations"]:
            assert isinstance(t["text"], str)
            assert "truncated" not in t  # a sentence too long is translated in parts (core.sentences.fit)
    else:
        assert body["error"] in ("too_large", "validation") and body["message"] and body["request_id"]


@given(texts=st.lists(hostile_text, min_size=1, max_size=4), ascii_only=st.booleans())
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_hostile_text_gets_a_documented_answer(real_server: ProcessServer, texts: list[str], ascii_only: bool) -> None:
    raw = not ascii_only and any(has_lone_surrogate(t) for t in texts)  # raw surrogate bytes: not UTF-8
    # as escapes, a high half followed by a low half is a pair again: one valid character
    broken = raw or any(has_lone_surrogate(json.loads(json.dumps(t))) for t in texts)
    r = post(real_server, encode({"text": texts}, ascii_only=not raw))
    check_answer(r, texts)
    if broken:
        assert r.status_code == 422 and "surrogate" in r.json()["message"], r.text
    else:
        assert r.status_code == 200, r.text  # valid Unicode within the limits is translated


@given(text=valid_text, split=st.booleans(), attention=st.booleans())
@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_valid_unicode_is_translated_with_its_layout(
    real_server: ProcessServer, text: str, split: bool, attention: bool
) -> None:
    payload = {"text": text, "split_sentences": split, "return_attention": attention}
    r = post(real_server, encode(payload, ascii_only=False))
    assert r.status_code == 200, r.text
    out = r.json()["translations"][0]
    if not text.strip():
        assert out["text"] == text  # nothing to translate: the layout comes back as it was
    if attention and text.strip():
        assert len(out["attention"]["weights"]) == len(out["attention"]["target_tokens"])


@pytest.mark.parametrize(
    ("name", "raw", "status"),
    [
        ("lone high surrogate", b'{"text": "\\ud800"}', 422),
        ("lone low surrogate inside a word", b'{"text": "red\\udc00blue"}', 422),
        ("half a pair in a list", b'{"text": ["red", "\\ud83d"]}', 422),
        ("reversed pair", b'{"text": "\\ude00\\ud83d"}', 422),
        ("a valid pair is an emoji", b'{"text": "red \\ud83d\\ude00 blue"}', 200),
        ("raw surrogate bytes (not UTF-8)", b'{"text": "red \xed\xa0\x80 blue"}', 422),
        ("invalid UTF-8", b'{"text": "red \xff\xfe blue"}', 422),
        ("a NUL escape", b'{"text": "red\\u0000blue"}', 200),
        ("nested too deeply", b"[" * 100_000 + b"]" * 100_000, 422),
        ("not JSON", b"text=red", 422),
    ],
)
def test_bad_bytes_and_escapes(real_server: ProcessServer, name: str, raw: bytes, status: int) -> None:
    r = post(real_server, raw)
    assert r.status_code == status, f"{name}: {r.text}"
    if status == 422:
        assert r.json()["error"] == "validation"


def alone(server: ProcessServer, text: str) -> str:
    """The translation of ``text`` sent on its own (what it must be inside any other request)."""
    r = server.client.post("/translate", json={"text": text})
    assert r.status_code == 200, r.text
    out: str = r.json()["translations"][0]["text"]
    return out


def test_empty_and_whitespace_texts_keep_their_layout(real_server: ProcessServer) -> None:
    texts = ["", " ", "\n\n", "\t \r\n ", "\u00a0\u3000", "red blue\n\n\n", "  red. blue!  "]
    r = post(real_server, encode({"text": texts}, ascii_only=True))
    out = [t["text"] for t in r.json()["translations"]]
    assert out[:5] == texts[:5]
    assert out[5] == alone(real_server, "red blue") + "\n\n\n"
    assert out[6].startswith("  ") and out[6].endswith("  ")


def test_100k_characters(real_server: ProcessServer) -> None:
    big = "red blue gold navy " * 5263 + "red"  # 100,000 characters, one run-on sentence
    assert len(big) == 100_000
    one = post(real_server, encode({"text": big}, ascii_only=True))
    assert one.status_code == 413 and "MT_MAX_CHARS" in one.json()["message"]
    # the same 100k characters as ten texts within the limit: each one sentence, translated in parts of the model's
    # length, none cut off
    ten = post(real_server, encode({"text": [big[i : i + 10_000] for i in range(0, 100_000, 10_000)]}, True))
    assert ten.status_code == 200, ten.text
    assert all("truncated" not in t and t["text"] for t in ten.json()["translations"])


def test_a_single_5000_piece_word_is_translated_in_parts(real_server: ProcessServer, long_word: str) -> None:
    r = post(real_server, encode({"text": long_word}, ascii_only=True))
    assert r.status_code == 200, r.text
    assert "truncated" not in r.json()["translations"][0]
    # with its attention it is more source pieces than one request may ask maps for: refused, saying so
    r = post(real_server, encode({"text": long_word, "return_attention": True}, ascii_only=True))
    assert r.status_code == 413 and "MT_MAX_ATTENTION_PIECES" in r.json()["message"]


def test_thousands_of_tiny_texts_while_healthz_answers(real_server: ProcessServer) -> None:
    texts = [WORDS[i % len(WORDS)] for i in range(2500)]
    health: list[tuple[int, float]] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=real_server.url, timeout=10) as c:
            for _ in range(2000):  # bounded; stops when the big request is answered
                if done.is_set():
                    return
                started = time.monotonic()
                health.append((c.get("/healthz").status_code, time.monotonic() - started))
                time.sleep(0.05)

    thread = threading.Thread(target=probe)
    thread.start()
    try:
        r = post(real_server, encode({"text": texts}, ascii_only=True), timeout=120)
    finally:
        done.set()
        thread.join(timeout=15)
    assert r.status_code == 200, r.text
    expected = {w: alone(real_server, w) for w in WORDS}
    assert [t["text"] for t in r.json()["translations"]] == [expected[w] for w in texts]
    assert health and all(status == 200 for status, _ in health)
    assert max(latency for _, latency in health) < 5
    too_many = post(real_server, encode({"text": ["red"] * 3001}, ascii_only=True))
    assert too_many.status_code == 413 and "MT_MAX_TEXTS" in too_many.json()["message"]


def test_no_request_reached_the_last_resort_handler(real_server: ProcessServer) -> None:
    """Runs after the others of this module: no unhandled exception in the server's log."""
    assert real_server.client.get("/healthz").status_code == 200
    assert "unhandled error" not in real_server.log()
