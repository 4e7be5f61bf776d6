"""bench search-cost: its workers drive the tree's real BeamSearch; two runs of one tree choose the same tokens."""

from __future__ import annotations

import json
from pathlib import Path

from bench import search_cost


def test_search_cost_compares_two_trees_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "report"
    status = search_cost.main(
        ["--a", ".", "--b", ".", "--batch-sizes", "1,6", "--steps", "60", "--repeats", "1", "--out", str(out)]
    )
    assert status == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert [row["batch"] for row in data["rows"]] == [1, 6]
    for row in data["rows"]:
        assert row["same_outputs"] is True
        assert all(ms > 0 for ms in row["a"] + row["b"])
    assert "| 6 |" in out.with_suffix(".md").read_text(encoding="utf-8")


def test_tokens_from_few_pieces_make_the_guard_ban_and_both_trees_agree(tmp_path: Path) -> None:
    """``--pieces``: the stepper draws its tokens from a few pieces (which repeat, as real ones do: bench ban-rate
    counts how often the guard then bans); the same tree twice still chooses the same tokens, and the report says
    how the tokens were drawn."""
    out = tmp_path / "report"
    argv = ["--a", ".", "--b", ".", "--batch-sizes", "2,64", "--steps", "40", "--repeats", "1", "--out", str(out)]
    assert search_cost.main([*argv, "--no-repeat-ngram", "2", "--pieces", "40"]) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert all(row["same_outputs"] for row in data["rows"])
    assert "tokens drawn from 40 pieces" in out.with_suffix(".md").read_text(encoding="utf-8")


def test_the_two_forms_of_one_tree_choose_the_same(tmp_path: Path) -> None:
    """``--a-arrays-from`` / ``--b-arrays-from``: one tree's search with its hypotheses always linked against always
    in arrays, over hundreds of steps with sentences leaving and arriving, the n-gram guard banning and a length
    penalty: the same tokens for every sentence, and the report names each side's setting."""
    out = tmp_path / "report"
    argv = ["--a", ".", "--a-arrays-from", "1000000000", "--b", ".", "--b-arrays-from", "1"]
    argv += ["--batch-sizes", "3,40", "--steps", "120", "--repeats", "1", "--out", str(out)]
    argv += ["--no-repeat-ngram", "3", "--length-penalty", "1.4", "--pieces", "40"]
    assert search_cost.main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert data["arrays_from"] == {"a": 1000000000, "b": 1}
    assert all(row["same_outputs"] for row in data["rows"])
    assert "(ARRAYS_FROM 1)" in out.with_suffix(".md").read_text(encoding="utf-8")


def test_cold_caches_change_no_choice_and_the_report_says_so(tmp_path: Path) -> None:
    """``--evict-mb``: the stepper writes through memory between steps (the search runs with cold caches, as beside
    onnxruntime on the CPU); the same tree twice chooses the same tokens, and the report says how much was written."""
    out = tmp_path / "report"
    argv = ["--a", ".", "--b", ".", "--batch-sizes", "3", "--steps", "30", "--repeats", "1", "--out", str(out)]
    assert search_cost.main([*argv, "--evict-mb", "1"]) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert all(row["same_outputs"] for row in data["rows"])
    assert "1 MB written between steps" in out.with_suffix(".md").read_text(encoding="utf-8")
