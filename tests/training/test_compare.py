"""``python -m training compare-scores``: the ship rule a retraining writes down before it starts, checked."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from training.cli import main
from training.compare import FIVE_TESTS, judge, load_scores


def _write(path: Path, bleu: dict[str, float]) -> Path:
    # The shape `evaluate-bundle --json` writes: one entry per test file, keyed by the path it was given.
    data = {f"data/x/{name}": {"bleu": b, "chrf": b + 20, "sentences": 10, "seconds": 0.1} for name, b in bleu.items()}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _scores(rng: random.Random) -> dict[str, float]:
    return {name: round(rng.uniform(10, 50), 2) for name in (*FIVE_TESTS, "test.games.tsv", "dev.tsv")}


@pytest.mark.parametrize("seed", range(20))
def test_the_verdict_follows_the_rule_on_random_scores(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    old = _scores(rng)
    new = {name: round(b + rng.uniform(-0.6, 0.6), 2) for name, b in old.items()}
    old_mean = sum(old[n] for n in FIVE_TESTS) / 5
    new_mean = sum(new[n] for n in FIVE_TESTS) / 5
    expected = round(old_mean - new_mean, 2) <= 0.3 and new["test.games.tsv"] > old["test.games.tsv"]
    status = main(
        [
            "compare-scores",
            str(_write(tmp_path / "old.json", old)),
            str(_write(tmp_path / "new.json", new)),
            "--must-rise",
            "test.games.tsv",
            "--out",
            str(tmp_path / "report.md"),
        ]
    )
    assert status == (0 if expected else 1)
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert report.rstrip().endswith("Met." if expected else "Not met.")
    # Every set scored in both files has its row, with the change computed from the two files.
    for name in old:
        assert f"| {name} | {old[name]:.2f} / {old[name] + 20:.2f} | {new[name]:.2f} / " in report
        assert f"| {new[name] - old[name]:+.2f} |" in report


def test_a_drop_of_exactly_the_limit_passes_and_one_hundredth_more_fails(tmp_path: Path) -> None:
    old = {name: 30.0 for name in FIVE_TESTS}
    exact = {**old, "test.bible.tsv": 30.0 - 5 * 0.3}  # the mean falls by 0.3
    beyond = {**old, "test.bible.tsv": 30.0 - 5 * 0.31}
    assert judge(old_scores := _as_scores(old), _as_scores(exact), list(FIVE_TESTS), []).met
    assert not judge(old_scores, _as_scores(beyond), list(FIVE_TESTS), []).met


def test_a_set_the_rule_names_but_a_file_lacks_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _write(tmp_path / "old.json", {name: 30.0 for name in FIVE_TESTS})
    new = _write(tmp_path / "new.json", {name: 31.0 for name in FIVE_TESTS})
    assert main(["compare-scores", str(old), str(new), "--must-rise", "test.games.tsv"]) == 2
    assert "test.games.tsv" in capsys.readouterr().err


def test_a_file_without_scores_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"command": "x"}), encoding="utf-8")
    with pytest.raises(ValueError, match="no scores"):
        load_scores(path)


def _as_scores(bleu: dict[str, float]) -> dict[str, dict[str, float]]:
    return {name: {"bleu": b, "chrf": 0.0} for name, b in bleu.items()}
