"""The truecase table: counted from the training text, written into a bundle by `truecase` and by `export`, and
read by the engine for a sentence in capitals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.bundle import BundleError, read_manifest
from core.casing import TRUECASE_FILE
from core.translation import DecodeOptions
from training.truecase import add_to_bundle, build_table


def test_a_word_takes_the_case_it_has_most_often_inside_sentences() -> None:
    lines = [
        "We met in Paris and later in Paris again.",  # Paris twice inside
        "Paris is first here, so it does not count.",
        "paris in lower case once, Then Then then.",  # paris: 2 Paris, 1 paris -> Paris; then: 2 Then, 1 then
        "THE USB STICK AND PARIS",  # a line in capitals says nothing
        "a USB stick, a USB port, an usb cable",  # USB 2 of 3
        "the Zebra once",  # seen once: not trusted
        "an Apple, an apple",  # a tie is not a usual case
    ]
    assert build_table(lines) == {"paris": "Paris", "then": "Then", "usb": "USB"}
    assert build_table(lines, min_count=4) == {}


def _tsv(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\tziel\n" for line in lines), encoding="utf-8")
    return path


def test_truecase_command_adds_a_table_the_manifest_verifies_and_the_engine_reads(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    from inference.engine import Engine

    assert not (tiny_bundle / TRUECASE_FILE).exists()  # the synthetic corpus is all lower case: no table
    bundle = Path(shutil.copytree(tiny_bundle, tmp_path / "bundle"))
    text = _tsv(tmp_path / "train.tsv", ["red Gold blue", "the Gold and Gold", "X Gold"])
    assert add_to_bundle(bundle, text)["words"] == 1
    manifest = read_manifest(bundle)  # every file, the table's too, with its sha256
    assert manifest["vocabulary"]["truecase"] == TRUECASE_FILE and TRUECASE_FILE in manifest["files"]
    assert manifest["export"]["truecase"] == {"file": "train.tsv", "words": 1}
    engine = Engine.load(bundle, provider="cpu", threads=1)
    assert engine.casing.table == {"gold": "Gold"}

    # the engine reads the sentence in capitals folded with the table, and answers every hypothesis in capitals
    tokenizer, options = engine.tokenizer, DecodeOptions(beam_size=3, n_best=2)
    assert engine.tokenize("RED GOLD BLUE") == tokenizer.encode_source("Red Gold blue")
    caps, lower = engine.translate(["RED GOLD BLUE", "red gold blue"], options)
    folded, plain = engine.translate_ids(
        [tokenizer.encode_source(t) for t in ("Red Gold blue", "red gold blue")], options
    )
    assert [h.text for h in caps.hypotheses] == [h.text.upper() for h in folded.hypotheses]
    assert [h.pieces for h in caps.hypotheses] == [h.pieces for h in folded.hypotheses]
    assert caps.source_pieces == folded.source_pieces
    assert [h.text for h in lower.hypotheses] == [h.text for h in plain.hypotheses]  # not in capitals: as it was

    from service.engine_process import BundleFront  # the server's side when the engine runs in its own process

    assert BundleFront(bundle).tokenize("RED GOLD BLUE") == engine.tokenize("RED GOLD BLUE")


def test_truecase_refuses_a_text_with_no_usual_case(tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = Path(shutil.copytree(tiny_bundle, tmp_path / "bundle"))
    with pytest.raises(BundleError, match="no word"):
        add_to_bundle(bundle, _tsv(tmp_path / "lower.tsv", ["all lower case here", "and here"]))
    assert "truecase" not in read_manifest(bundle)["vocabulary"]


def test_export_writes_the_table_of_the_text_it_is_given(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from training.export import export_bundle

    text = _tsv(tmp_path / "train.tsv", ["the Blue one", "a Blue sky", "in NASA and NASA"])
    manifest = export_bundle(tiny_checkpoint, tmp_path / "with", truecase=text)
    assert manifest["vocabulary"]["truecase"] == TRUECASE_FILE
    table = json.loads((tmp_path / "with" / TRUECASE_FILE).read_text(encoding="utf-8"))
    assert table == {"blue": "Blue", "nasa": "NASA"}
    assert "truecase" not in export_bundle(tiny_checkpoint, tmp_path / "without", truecase="none")["vocabulary"]
