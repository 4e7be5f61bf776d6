"""``python -m training back-translate``: synthetic sources from a real bundle, resumable, optionally noised."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions
from inference.engine import Engine
from training.back_translate import FILLER, back_translate, noisy

LINES = ["red blue green", "gold pink", "white black navy teal", "cyan", "plum gray red", "blue"]


def test_pairs_are_the_engines_translations_and_a_stopped_run_resumes(tiny_bundle: Path, tmp_path: Path) -> None:
    source = tmp_path / "mono.txt"
    source.write_text("\n".join(LINES) + "\n\n", encoding="utf-8")
    out = tmp_path / "bt.tsv"
    assert back_translate(tiny_bundle, source, out, limit=4, threads=1) == 4  # a run stopped after 4 lines
    assert back_translate(tiny_bundle, source, out, threads=1) == 2  # resumes with the other 2
    pairs = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert [real for _, real in pairs] == LINES
    engine = Engine.load(tiny_bundle, provider="cpu", threads=1)
    options = DecodeOptions(length_penalty=DEFAULT_LENGTH_PENALTY, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE)
    expected = [t.hypotheses[0].text for t in engine.translate(LINES, options)]
    assert [synthetic for synthetic, _ in pairs] == expected


def test_noise_drops_blanks_and_moves_words_only_a_little() -> None:
    words = [f"w{i}" for i in range(200)]
    noised = noisy(" ".join(words), random.Random(1)).split()
    kept = [w for w in noised if w != FILLER]
    assert 0.7 * len(words) < len(noised) < 0.97 * len(words)  # about 10% dropped
    assert 0.03 * len(words) < noised.count(FILLER) < 0.2 * len(words)  # about 10% blanked
    positions = [int(w[1:]) for w in kept]
    assert positions != sorted(positions)  # moved
    rank = {p: r for r, p in enumerate(sorted(positions))}
    assert all(abs(i - rank[p]) <= 3 for i, p in enumerate(positions))  # but by at most 3 places
    assert noisy("", random.Random(1)) == ""


def test_two_lanes_write_what_one_set_writes(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of 32 or more decode as two lanes on the CPU by default (fp32 graphs: no batch mate moves a
    sentence's rounding), and every line keeps its own translation, in input order, as with one set."""
    words = LINES[0].split() + LINES[2].split()
    lines = [" ".join(words[(i + j) % len(words)] for j in range(1 + i % 5)) for i in range(70)]
    source = tmp_path / "mono.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    loads: list[int] = []
    load = Engine.load

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        loads.append(kwargs.get("lanes", 1))
        return load(*args, **kwargs)

    monkeypatch.setattr(Engine, "load", counted)
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert back_translate(tiny_bundle, source, one, lanes=1, threads=2) == len(lines)
    assert back_translate(tiny_bundle, source, two, threads=2) == len(lines)  # 0: two lanes here
    assert back_translate(tiny_bundle, source, tmp_path / "small.tsv", batch=8, threads=2, limit=8) == 8
    assert loads == [1, 2, 1]  # batches under 32 would decode as one lane on half the threads: one set
    with pytest.raises(SystemExit, match="--lanes 9"):
        back_translate(tiny_bundle, source, tmp_path / "nine.tsv", lanes=9)
    assert two.read_text(encoding="utf-8") == one.read_text(encoding="utf-8")
    assert [line.split("\t")[1] for line in two.read_text(encoding="utf-8").splitlines()] == lines
