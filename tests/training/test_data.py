from pathlib import Path

import pytest

from training.data import DataError, clean, padded_width, prepare, read_parallel, read_tsv, token_batches


def test_tsv_with_wrong_column_count_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text("a\tb\nc\td\te\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.tsv:2: expected 2 tab-separated columns.*found 3"):
        read_tsv(path)


def test_undecodable_bytes_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.tsv"
    path.write_bytes(b"ok\tgut\n" + "caf\xe9\tCaf\xe9\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1.tsv:2: not valid UTF-8"):
        read_tsv(path)


def test_unequal_parallel_files(tmp_path: Path) -> None:
    (tmp_path / "a.en").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("eins\nzwei\n", encoding="utf-8")
    with pytest.raises(DataError, match="3 lines but .* has 2"):
        read_parallel(tmp_path / "a.en", tmp_path / "a.de")


def test_clean_counts_each_reason() -> None:
    pairs = [
        ("hello", "hallo"),
        ("", "x"),
        ("same words", "same words"),
        ("hello", "hallo"),
        ("a " * 200, "b " * 200),
        ("short", "a much much much much longer sentence here"),
    ]
    kept, report = clean(pairs)
    assert kept == [("hello", "hallo")]
    assert report.dropped == {
        "empty": 1,
        "identical": 1,
        "duplicate": 1,
        "too_long": 1,
        "length_ratio": 1,
    }


def test_prepare_keeps_dev_and_test_sources_out_of_train(tmp_path: Path) -> None:
    lines = [f"sentence {i % 300}\tSatz {i}" for i in range(900)]
    (tmp_path / "all.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary = prepare(tmp_path / "out", tmp_path / "all.tsv", dev_size=50, test_size=50)
    train = read_tsv(tmp_path / "out" / "train.tsv")
    held = {s for s, _ in read_tsv(tmp_path / "out" / "dev.tsv") + read_tsv(tmp_path / "out" / "test.tsv")}
    assert train and not held & {s for s, _ in train}
    assert summary["train"] == len(train)


def test_token_batches_cover_everything_once_and_respect_the_budget() -> None:
    examples = [([1] * (i % 17 + 1), [2] * (i % 13 + 1)) for i in range(500)]
    batches = token_batches(examples, batch_tokens=64, seed=3, epoch=0)
    seen = sorted(i for b in batches for i in b)
    assert seen == list(range(500))
    for b in batches:
        width = max(max(len(examples[i][0]), len(examples[i][1])) + 1 for i in b)
        assert width * len(b) <= 64 or len(b) == 1
    assert batches == token_batches(examples, 64, seed=3, epoch=0)
    assert batches != token_batches(examples, 64, seed=3, epoch=1)


def test_padded_batches_respect_the_budget_at_padded_width_and_repeat_shapes() -> None:
    examples = [([1] * (i % 37 + 1), [2] * (i * 7 % 29 + 1)) for i in range(2000)]
    plain = token_batches(examples, batch_tokens=256, seed=3, epoch=0)
    padded = token_batches(examples, batch_tokens=256, seed=3, epoch=0, multiple=8)
    assert sorted(i for b in padded for i in b) == list(range(2000))

    def shape(b: list[int], multiple: int) -> tuple[int, int, int]:
        src = padded_width(max(len(examples[i][0]) for i in b) + 1, multiple)
        tgt = padded_width(max(len(examples[i][1]) for i in b) + 1, multiple)
        assert max(src, tgt) * len(b) <= 256 or len(b) == 1
        return len(b), src, tgt

    plain_shapes = {shape(b, 1) for b in plain}
    padded_shapes = {shape(b, 8) for b in padded}
    assert all(s % 8 == 0 and t % 8 == 0 for _, s, t in padded_shapes)
    assert len(padded_shapes) * 3 < len(plain_shapes)


def test_padded_width_rounds_up() -> None:
    assert [padded_width(n, 8) for n in (1, 7, 8, 9, 16, 17)] == [8, 8, 8, 16, 16, 24]
    assert [padded_width(n, 1) for n in (1, 5)] == [1, 5]


def test_prepare_scales_held_out_sets_to_a_small_corpus_and_never_writes_an_empty_split(tmp_path: Path) -> None:
    from training.data import DataError, prepare, write_tsv

    pairs = [(f"source sentence number {i}", f"Quellsatz Nummer {i}") for i in range(200)]
    write_tsv(pairs, tmp_path / "all.tsv")
    summary = prepare(tmp_path / "out", tmp_path / "all.tsv")  # the default 1000 + 1000 would take everything
    assert (summary["dev"], summary["test"], summary["train"]) == (20, 20, 160)
    assert "dev and test take 20 each" in summary["notes"][0]  # type: ignore[index]
    write_tsv([("short", "a much much much longer target side here")] * 3, tmp_path / "bad.tsv")
    with pytest.raises(DataError, match="no training pairs would be left.*--max-ratio"):
        prepare(tmp_path / "out2", tmp_path / "bad.tsv")
