"""``python -m training reverse-corpus``: the corpus the other way round, with no held-out source trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.cli import main
from training.data import DataError, read_tsv, reverse_corpus, write_tsv


def test_reverse_swaps_every_file_and_keeps_held_out_sources_out_of_training(tmp_path: Path) -> None:
    corpus = tmp_path / "en-de"
    write_tsv(
        [("Open", "Öffnen"), ("Close", "Schließen"), ("Shut", "Schließen"), ("Save", "Speichern")], corpus / "train.tsv"
    )
    write_tsv([("Save file", "Datei speichern")], corpus / "dev.tsv")
    write_tsv([("Close window", "Schließen")], corpus / "test.ui.tsv")  # a German side that training also has
    write_tsv([("Print", "Drucken")], corpus / "eval-reserved.tsv")
    (corpus / "LICENSES.md").write_text("licenses\n", encoding="utf-8")

    assert main(["reverse-corpus", str(corpus), "--out", str(tmp_path / "de-en")]) == 0
    out = tmp_path / "de-en"
    assert read_tsv(out / "train.tsv") == [("Öffnen", "Open"), ("Speichern", "Save")]
    assert read_tsv(out / "dev.tsv") == [("Datei speichern", "Save file")]
    assert read_tsv(out / "test.ui.tsv") == [("Schließen", "Close window")]
    assert read_tsv(out / "eval-reserved.tsv") == [("Drucken", "Print")]
    assert (out / "LICENSES.md").read_text(encoding="utf-8") == "licenses\n"
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["dropped_train_pairs_with_held_out_source"] == 2
    assert report["pairs"]["train.tsv"] == 2


def test_reverse_refuses_what_is_not_a_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reverse-corpus", str(tmp_path), "--out", str(tmp_path / "out")]) != 0
    assert "no train.tsv" in capsys.readouterr().err
    write_tsv([("a", "b")], tmp_path / "train.tsv")
    with pytest.raises(DataError, match="directory of its own"):
        reverse_corpus(tmp_path, tmp_path)


def test_a_second_training_file_is_training_data_not_a_held_out_set(tmp_path: Path) -> None:
    """train+bt.tsv (the corpus plus back-translated pairs) is reversed and filtered like train.tsv; it must not
    count as held out, which dropped every training pair whose German side it holds (all of them)."""
    corpus = tmp_path / "en-de"
    pairs = [("Open", "Öffnen"), ("Close", "Schließen"), ("Save", "Speichern")]
    write_tsv(pairs, corpus / "train.tsv")
    write_tsv([*pairs, ("Synthetic", "Echt")], corpus / "train+bt.tsv")
    write_tsv([("Close window", "Schließen")], corpus / "test.ui.tsv")
    write_tsv([("Save file", "Datei speichern")], corpus / "dev.tsv")

    reverse_corpus(corpus, tmp_path / "de-en")
    out = tmp_path / "de-en"
    assert read_tsv(out / "train.tsv") == [("Öffnen", "Open"), ("Speichern", "Save")]
    assert read_tsv(out / "train+bt.tsv") == [("Öffnen", "Open"), ("Speichern", "Save"), ("Echt", "Synthetic")]
    assert read_tsv(out / "test.ui.tsv") == [("Schließen", "Close window")]
