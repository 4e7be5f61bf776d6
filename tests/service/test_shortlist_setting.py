"""MT_SHORTLIST: the loader opens a bundle's vocabulary shortlist where it has one, and only warns where not."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from service.__main__ import settings_from
from service.loader import load_engine
from training.export.shortlist import add_to_bundle


def test_the_flag_and_the_environment_turn_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_from([]).shortlist is False
    assert settings_from(["--shortlist"]).shortlist is True
    monkeypatch.setenv("MT_SHORTLIST", "1")
    assert settings_from([]).shortlist is True


def test_the_loader_uses_a_bundle_s_shortlist_and_warns_without_one(
    tiny_bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    listed = tmp_path / "tiny"
    shutil.copytree(tiny_bundle, listed)
    add_to_bundle(listed, [synthetic_corpus[0]], per_piece=3, frequent=16, limit=500)
    engine = load_engine(listed, provider="cpu", threads=1, shortlist=True)
    assert engine.shortlist is not None and "decoder_shortlist" in engine.sessions
    with caplog.at_level(logging.WARNING, logger="service.loader"):
        plain = load_engine(tiny_bundle, provider="cpu", threads=1, shortlist=True)
    assert plain.shortlist is None
    assert "has no vocabulary shortlist" in caplog.text and "python -m training shortlist" in caplog.text
    assert load_engine(listed, provider="cpu", threads=1).shortlist is None  # off unless asked
