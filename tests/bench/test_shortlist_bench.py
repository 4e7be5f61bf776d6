"""bench shortlist: both engines on one bundle, speed per batch size and quality per input file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import shortlist
from training.export.shortlist import add_to_bundle


@pytest.fixture(scope="module")
def bundle(tiny_bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny bundle with a shortlist."""
    out = tmp_path_factory.mktemp("listed") / "tiny"
    shutil.copytree(tiny_bundle, out)
    add_to_bundle(out, [synthetic_corpus[0]], per_piece=3, frequent=16, limit=1000)
    return out


def test_the_bench_measures_both_engines_and_writes_its_report(
    bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "report"
    argv = [str(bundle), "--inputs", str(synthetic_corpus[1]), "--sentences", "6", "--batch-sizes", "1,3"]
    assert shortlist.main([*argv, "--repeats", "1", "--threads", "1", "--out", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert [row["batch"] for row in data["speed"]] == [1, 3]
    assert all(row["ratio"] > 0 and row["full_sentences_per_s"] > 0 for row in data["speed"])
    (row,) = data["quality"]
    assert row["set"] == "dev.tsv" and row["sentences"] == 100
    assert 0.0 <= row["identical"] <= 1.0 and 0.0 <= row["inside"] <= 1.0
    assert row["full_bleu"] > 50  # the tiny model has learned its task
    assert row["list_mean"] < 69
    assert "| dev.tsv | 100 |" in out.with_suffix(".md").read_text(encoding="utf-8")


def test_a_bundle_without_a_shortlist_is_refused(tiny_bundle: Path, synthetic_corpus: tuple[Path, Path]) -> None:
    with pytest.raises(Exception, match="python -m training shortlist"):
        shortlist.main([str(tiny_bundle), "--inputs", str(synthetic_corpus[1]), "--batch-sizes", "1"])


def test_speed_only_with_another_threshold(bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    argv = [str(bundle), "--inputs", str(synthetic_corpus[1]), "--sentences", "4", "--batch-sizes", "2"]
    assert (
        shortlist.main([*argv, "--repeats", "1", "--threads", "1", "--most", "1", "--speed-only", "--out", str(out)])
        == 0
    )
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert data["shortlist_most"] == 1.0 and data["quality"] == [] and len(data["speed"]) == 1
    assert "Quality" not in out.with_suffix(".md").read_text(encoding="utf-8")
