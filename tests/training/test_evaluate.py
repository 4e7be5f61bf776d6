import json
import subprocess
import sys
from pathlib import Path

import pytest

import training.evaluate
from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions
from training.evaluate import evaluate, evaluate_bundle


def test_checkpoint_and_bundle_scores_agree(
    tiny_checkpoint: Path, tiny_bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    dev = synthetic_corpus[1]
    torch_scores = evaluate(tiny_checkpoint, dev, tmp_path / "hyp.txt", beam_size=1)
    # The reference decoder's search: no n-gram blocking, no length penalty (the server's defaults would block a
    # reversed sentence that repeats a word three times, which the reference decoder writes out).
    engine_scores = evaluate_bundle(
        tiny_bundle, [dev], beam_size=1, hypotheses_dir=tmp_path, no_repeat_ngram=0, length_penalty=1.0
    )
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


def test_evaluate_bundle_decodes_with_the_options_asked_for(
    tiny_bundle: Path, synthetic_corpus: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[DecodeOptions] = []

    def record(engine: object, texts: list[str], options: DecodeOptions, *rest: object) -> tuple[list[str], float]:
        seen.append(options)
        return list(texts), 1.0

    monkeypatch.setattr(training.evaluate, "translate_texts", record)
    evaluate_bundle(tiny_bundle, [synthetic_corpus[1]], beam_size=3, length_penalty=0.6, no_repeat_ngram=2)
    evaluate_bundle(tiny_bundle, [synthetic_corpus[1]])
    assert seen == [
        DecodeOptions(beam_size=3, length_penalty=0.6, no_repeat_ngram_size=2),
        DecodeOptions(
            beam_size=4, length_penalty=DEFAULT_LENGTH_PENALTY, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE
        ),
    ]
