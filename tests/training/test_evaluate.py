import json
import subprocess
import sys
from pathlib import Path

from training.evaluate import evaluate, evaluate_bundle


def test_checkpoint_and_bundle_scores_agree(
    tiny_checkpoint: Path, tiny_bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    dev = synthetic_corpus[1]
    torch_scores = evaluate(tiny_checkpoint, dev, tmp_path / "hyp.txt", beam_size=1)
    engine_scores = evaluate_bundle(tiny_bundle, [dev], beam_size=1, hypotheses_dir=tmp_path)
    assert torch_scores["bleu"] > 80
    # Same search, same weights: the reference decoder and the ONNX engine write the same sentences.
    assert (tmp_path / "hyp.txt").read_text() == (tmp_path / "dev.hyp").read_text()
    assert engine_scores["dev.tsv"]["bleu"] == round(torch_scores["bleu"], 2)


def test_evaluate_bundle_cli_writes_json(
    tiny_bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "scores.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "training",
            "evaluate-bundle",
            str(tiny_bundle),
            str(synthetic_corpus[1]),
            "--beam",
            "2",
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    scores = json.loads(out.read_text())
    assert set(scores) == {"dev.tsv"} and scores["dev.tsv"]["sentences"] == 100
    assert scores["dev.tsv"]["seconds"] > 0
