"""Inputs the engine must handle explicitly: empty, too long, unknown characters, bad ids and options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.translation import DecodeOptions
from inference.engine import Engine, EngineError, gpu_present


@pytest.fixture(scope="module")
def engine(tiny_bundle: Path) -> Engine:
    return Engine.load(tiny_bundle, provider="cpu", threads=1)


def test_interface(engine: Engine) -> None:
    assert engine.provider == "CPUExecutionProvider"
    assert engine.manifest["name"] and engine.max_source_pieces == engine.max_positions - 1
    assert engine.sessions["decoder"].get_session_options().intra_op_num_threads == 1
    engine.warmup()
    assert engine.translate([], DecodeOptions()) == []


def test_empty_input_gets_one_empty_hypothesis(engine: Engine) -> None:
    options = DecodeOptions(return_attention=True)
    empty, full, blank = engine.translate(["", "red blue", "  \n "], options)
    for t in (empty, blank):
        assert t.source_pieces == [] and len(t.hypotheses) == 1
        assert t.best.text == "" and t.best.token_ids == [] and t.best.score == 0.0
        assert t.best.attention is not None and t.best.attention.shape == (0, 0)
    assert full.best.text
    assert engine.tokenize("") == []
    assert engine.translate_ids([[]], DecodeOptions())[0].best.pieces == []


def test_overlong_source_is_truncated_and_flagged(engine: Engine) -> None:
    options = DecodeOptions(beam_size=1, max_length=4)
    long_text = " ".join(["red", "blue"] * engine.max_source_pieces)
    [t] = engine.translate([long_text], options)
    assert t.truncated_source and len(t.source_pieces) == engine.max_source_pieces
    assert 1 <= len(t.best.token_logprobs) <= 4
    [short] = engine.translate(["red blue"], options)
    assert not short.truncated_source


def test_unknown_characters_become_unk_and_keep_their_piece(engine: Engine) -> None:
    text = "red \u6f22\u5b57 blue"
    ids = engine.tokenize(text)
    unk = engine.manifest["special_ids"]["unk"]
    assert unk in ids
    [t] = engine.translate([text], DecodeOptions(return_attention=True))
    assert any("\u6f22" in piece for piece in t.source_pieces)  # the original text, not "<unk>"
    assert t.best.attention is not None and t.best.attention.shape[1] == len(ids)
    assert t.alignment is not None and "\u6f22\u5b57" in t.alignment.source_words


def test_bad_ids_and_options_are_refused_with_the_value(engine: Engine) -> None:
    with pytest.raises(ValueError, match=r"source 1, position 0: id 100000 is outside"):
        engine.translate_ids([[5], [100000]], DecodeOptions())
    with pytest.raises(ValueError, match="beam_size=0"):
        engine.translate_ids([[5]], DecodeOptions(beam_size=0))
    with pytest.raises(ValueError, match="length_penalty=nan"):
        engine.translate_ids([[5]], DecodeOptions(length_penalty=float("nan")))


def test_numpy_ids_are_accepted(engine: Engine) -> None:
    ids = engine.tokenize("gold pink")
    a = engine.translate_ids([ids], DecodeOptions())[0]
    b = engine.translate_ids([list(np.array(ids, dtype=np.int64))], DecodeOptions())[0]
    assert a.best.token_ids == b.best.token_ids


def test_provider_choice(tiny_bundle: Path) -> None:
    with pytest.raises(EngineError, match="provider='tpu'"):
        Engine.load(tiny_bundle, provider="tpu")
    if not gpu_present():
        with pytest.raises(EngineError, match="no usable CUDA"):
            Engine.load(tiny_bundle, provider="cuda")
        assert Engine.load(tiny_bundle, provider="auto").provider == "CPUExecutionProvider"
