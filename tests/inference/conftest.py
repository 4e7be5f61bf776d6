"""Fixtures the inference tests share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from training.cli import main as training_cli


@pytest.fixture(scope="module")
def listed_bundle(
    tiny_bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The tiny bundle with a shortlist, added as a user would (``python -m training shortlist``)."""
    out = tmp_path_factory.mktemp("shortlist") / "tiny"
    shutil.copytree(tiny_bundle, out)
    argv = ["shortlist", str(out), "--data", str(synthetic_corpus[0]), "--per-piece", "3", "--frequent", "16"]
    assert training_cli(argv) == 0
    return out
