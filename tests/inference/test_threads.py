"""One onnxruntime thread pool for the process (inference/threads.py).

onnxruntime's shared pools are process-wide and final, so the process that shares one is a child of the test:
the pytest process itself keeps a pool per session, as every other test expects.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.translation import DecodeOptions
from inference.engine import Engine, EngineError

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["red blue green", "the small house is red", "blue", "green green red blue house small"]

CHILD = textwrap.dedent(
    """
    import json, logging, sys
    from pathlib import Path

    import onnxruntime as ort

    from core.translation import DecodeOptions
    from inference.engine import Engine
    from inference.threads import session_options, shared_pool_size

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    bundle = Path(sys.argv[1])
    sources = json.loads(sys.argv[2])
    options = DecodeOptions(beam_size=4, n_best=2)
    before = shared_pool_size()
    first = Engine.load(bundle, provider="cpu", threads=2, shared_pool=True)
    second = Engine.load(bundle, provider="cpu", threads=1, shared_pool=True)  # keeps the first size
    third = Engine.load(bundle, provider="cpu", threads=1)  # asks for pools of its own: joins the shared one
    extra = ort.InferenceSession(str(bundle / "decoder.onnx"), session_options(3), providers=["CPUExecutionProvider"])
    engines = (first, second, third)
    sessions = [s for e in engines for s in e.sessions.values()] + [extra]
    print(json.dumps({
        "before": before,
        "size": shared_pool_size(),
        "own_pools": [s.get_session_options().use_per_session_threads for s in sessions],
        "outputs": [[[h.token_ids for h in t.hypotheses] for t in e.translate(sources, options)] for e in engines],
    }))
    """
)


def test_one_pool_for_the_process_translates_like_a_pool_per_session(tiny_bundle: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(tiny_bundle), json.dumps(SOURCES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    assert report["before"] is None and report["size"] == 2
    assert "already shares one of 2: keeping it" in child.stderr
    assert report["own_pools"] and not any(report["own_pools"])

    alone = Engine.load(tiny_bundle, provider="cpu", threads=2)  # this process: a pool per session
    assert alone.sessions["decoder"].get_session_options().use_per_session_threads
    expected = [
        [h.token_ids for h in t.hypotheses] for t in alone.translate(SOURCES, DecodeOptions(beam_size=4, n_best=2))
    ]
    assert all(h for t in expected for h in t), "the tiny model should translate every source"
    assert report["outputs"] == [expected] * 3


def _spins(session: object) -> bool:
    """Whether a session's idle intra-op threads busy-wait: onnxruntime's default unless told "0"."""
    options = session.get_session_options()  # type: ignore[attr-defined]
    try:
        return bool(options.get_session_config_entry("session.intra_op.allow_spinning") != "0")
    except Exception:  # onnxruntime raises for an entry never set
        return True


def test_only_the_decoder_steps_pool_spins_with_spinning_decoder(tiny_static_bundle: Path) -> None:
    """``spinning="decoder"``: the decoder step's sessions (dynamic and static) spin, every other graph's sleeps,
    and the translations are those of an engine whose pools all sleep."""
    options = DecodeOptions(beam_size=4, n_best=2)
    sleeping = Engine.load(tiny_static_bundle, provider="cpu", threads=2)
    assert not any(_spins(s) for s in sleeping.sessions.values())
    expected = [[h.token_ids for h in t.hypotheses] for t in sleeping.translate(SOURCES, options)]
    for static in (False, True):
        engine = Engine.load(tiny_static_bundle, provider="cpu", threads=2, spinning="decoder", static_step=static)
        assert {role for role, s in engine.sessions.items() if _spins(s)} == {"decoder"}
        got = [[h.token_ids for h in t.hypotheses] for t in engine.translate(SOURCES, options)]
        assert got == expected
        if static:
            opened = list(engine.static_pool._sessions.values())
            assert opened and all(_spins(s.session) for s in opened)  # the static steps' sessions spin too
            encoders = list(engine.static_pool._encoders.values())
            assert not any(_spins(e.session) for e in encoders)


def test_spinning_takes_only_known_values(tiny_bundle: Path) -> None:
    with pytest.raises(EngineError, match="spinning"):
        Engine.load(tiny_bundle, provider="cpu", spinning="encoder")
