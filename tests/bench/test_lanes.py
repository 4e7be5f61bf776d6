"""bench lanes on the tiny bundles: two lanes translate every sentence as one set does, and the report says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import lanes
from bench.loadtools import WORDS


@pytest.mark.parametrize("static", [False, True])
def test_two_lanes_translate_as_one_set_and_the_report_says_so(
    tiny_bundle: Path, tiny_fused_bundle: Path, tmp_path: Path, static: bool
) -> None:
    source = tmp_path / "in.tsv"
    lines = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(1 + i % 7)) for i in range(40)]
    source.write_text("".join(f"{line}\t{line.upper()}\n" for line in lines), encoding="utf-8")
    out = tmp_path / "report"
    args = ["--input", str(source), "--sentences", "40", "--batch-sizes", "40", "--configs", "1x1,2x1"]
    args += ["--bundle", str(tiny_fused_bundle), "--static-step"] if static else ["--bundle", str(tiny_bundle)]
    if not static:  # what back-translate loads (a spinning decoder pool), its search options, scored
        args[args.index("1x1,2x1")] = "1x1-spin,2x1"
        args += ["--server-options", "--bleu"]
    assert lanes.main([*args, "--repeats", "1", "--out", str(out)]) == 0
    report = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert report["meta"]["static_step"] is static and report["meta"]["sentences"] == 40
    assert report["meta"]["server_options"] is not static
    base, split = report["rows"]
    assert (base["config"], split["config"]) == ("1x1" if static else "1x1-spin", "2x1")
    assert base["identical_to_base"] == split["identical_to_base"] == 1.0  # float graphs: batch mates change nothing
    assert split["target_tok_s"] > 0 and split["vs_base"] > 0
    markdown = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "| 40 | 2x1 |" in markdown
    if not static:  # the same outputs score the same, against the references (the second column)
        assert base["bleu"] == split["bleu"] and base["chrf"] == split["chrf"] and "BLEU | chrF" in markdown
        assert lanes._references(source, 3) == [line.upper() for line in lines[:3]]
        with pytest.raises(SystemExit):
            lanes._references(source, 41)


def test_a_config_names_lanes_threads_and_spinning() -> None:
    assert lanes._config("2x1") == (2, 1, False)
    assert lanes._config("1x2-spin") == (1, 2, "decoder")
    with pytest.raises(SystemExit):
        lanes._config("1x2-fast")
