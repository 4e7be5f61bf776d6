import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from testkit.tiny import tiny_config
from training import checkpoint
from training.average import average
from training.decode import greedy, strip_eos


def test_tiny_model_learns_the_reversal_task(
    tiny_checkpoint: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    model, _, files = checkpoint.load_model(tiny_checkpoint)
    tok = checkpoint.load_tokenizer(files, tmp_path)
    pairs = [line.split("\t") for line in synthetic_corpus[1].read_text().splitlines()]
    sources = [tok.encode_source(s) for s, _ in pairs]
    outs = greedy(model, sources, [2 * len(s) + 10 for s in sources])
    hyps = [tok.decode(strip_eos(o.tokens, model.config.eos_id)) for o in outs]
    exact = sum(h == ref for h, (_, ref) in zip(hyps, pairs, strict=True)) / len(pairs)
    words = [(h.split(), ref.split()) for h, (_, ref) in zip(hyps, pairs, strict=True)]
    word_acc = sum(sum(a == b for a, b in zip(h, r, strict=False)) for h, r in words) / sum(len(r) for _, r in words)
    misses = [(h, ref) for h, (_, ref) in zip(hyps, pairs, strict=True) if h != ref]
    assert exact >= 0.85, misses[:5]
    assert word_acc >= 0.95, misses[:5]


def _train_cmd(run: Path, corpus: tuple[Path, Path], vocab: Path, steps: int) -> list[str]:
    cfg = tiny_config(*corpus, vocab, steps=steps)
    sets = [
        f"data.train={cfg.data.train}",
        f"data.dev={cfg.data.dev}",
        f"data.vocab={cfg.data.vocab}",
        f"train.max_steps={steps}",
        "train.save_every=10",
        "train.log_every=10",
        "train.eval_every=100000",
        "train.batch_tokens=256",
        "train.threads=1",
        "train.amp=false",  # two fresh runs probe bf16 on their own, and may decide apart on a CPU with it
    ]
    cmd = [sys.executable, "-m", "training", "train", str(run), "--preset", "tiny"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def _losses(run: Path) -> list[float]:
    state = checkpoint.load(run / "last.pt")["train_state"]["position"]
    return [r["train_nll"] for r in state["history"]]


def test_kill_and_resume_reproduces_the_uninterrupted_run(
    synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path
) -> None:
    steps = 60
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    subprocess.run(_train_cmd(whole, synthetic_corpus, tiny_vocab, steps), check=True, capture_output=True)

    proc = subprocess.Popen(
        _train_cmd(broken, synthetic_corpus, tiny_vocab, steps),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not (broken / "checkpoint-0000030.pt").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    interrupted_at = checkpoint.load(broken / "last.pt")["train_state"]["position"]["step"]
    assert interrupted_at < steps
    subprocess.run(_train_cmd(broken, synthetic_corpus, tiny_vocab, steps), check=True, capture_output=True)

    assert _losses(broken) == _losses(whole)
    a = checkpoint.load(whole / "last.pt")["model"]
    b = checkpoint.load(broken / "last.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_average_is_the_elementwise_mean(tiny_checkpoint: Path, tmp_path: Path) -> None:
    payload = checkpoint.load(tiny_checkpoint)
    other = {k: v * 3 if v.is_floating_point() else v for k, v in payload["model"].items()}
    second = tmp_path / "second.pt"
    checkpoint.save(second, {**payload, "model": other})
    out = average([tiny_checkpoint, second], tmp_path / "avg.pt")
    averaged = checkpoint.load(out)["model"]
    key = next(k for k, v in other.items() if v.is_floating_point())
    assert torch.allclose(averaged[key], payload["model"][key] * 2, atol=1e-6)


def test_cli_reports_bad_config_with_exit_code_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "training", "train", str(tmp_path), "--set", "model.n_heads=5"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "n_heads=5" in result.stderr


def test_a_run_that_used_its_time_budget_says_how_to_go_on(
    synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    cmd = [*_train_cmd(run, synthetic_corpus, tiny_vocab, 100_000), "--set", "train.max_minutes=0.02"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "time budget of 0.0 minutes reached at step" in first.stderr
    assert "of the time budget" in first.stderr  # the bar counts the budget, not the 100,000 steps
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "resumed from" in again.stderr and "raise train.max_minutes" in again.stderr
    assert "has used its time budget" in again.stderr and "--set train.max_minutes=0.04" in again.stderr


def test_a_run_writes_tensorboard_scalars_and_a_curve_at_each_evaluation(
    synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path
) -> None:
    pytest.importorskip("tensorboard")
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    cmd = [*_train_cmd(run, synthetic_corpus, tiny_vocab, 20), "--set", "train.eval_every=10"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (run / "curve.png").stat().st_size > 5_000
    [events] = list((run / "tensorboard").glob("events.out.tfevents.*"))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = EventAccumulator(str(events.parent))
    board.Reload()
    tags = set(board.Tags()["scalars"])
    assert {"train/nll", "train/lr", "dev/bleu", "dev/chrf", "dev/loss"} <= tags
    assert [e.step for e in board.Scalars("dev/bleu")] == [10, 20]


def test_max_epochs_stops_after_that_many_passes_over_the_data(
    synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import math

    from training.data import token_batches
    from training.train import Trainer

    cfg = tiny_config(*synthetic_corpus, tiny_vocab, steps=100_000, max_epochs=1.5, batch_tokens=256, eval_every=10**6)
    trainer = Trainer(cfg, tmp_path / "run")
    trainer.load_data()
    trainer.build()
    per_epoch = [
        len(token_batches(trainer.train, 256, cfg.train.seed, e, multiple=cfg.data.pad_multiple)) for e in (0, 1)
    ]
    with caplog.at_level(logging.INFO, logger="training"):
        pos = trainer.fit()
    assert pos.step == per_epoch[0] + math.ceil(per_epoch[1] / 2)
    assert (pos.epoch, pos.batch_in_epoch) == (1, math.ceil(per_epoch[1] / 2))
    assert f"1.5 epochs done at step {pos.step}" in caplog.text


def test_the_precision_probe_leaves_the_model_and_the_random_state_as_they_were(
    synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path
) -> None:
    """The probe that decides bf16 on the CPU (a forward and backward in each precision) trains nothing and draws
    nothing the run would have drawn: a run with the probe is the run without it."""
    from training.train import Trainer

    trainer = Trainer(tiny_config(*synthetic_corpus, tiny_vocab, steps=1), tmp_path / "run")
    trainer.build()
    weights = {name: value.clone() for name, value in trainer.module.state_dict().items()}
    random_state = torch.get_rng_state()
    assert trainer._bf16_pays(rounds=1) in (True, False)
    assert all(torch.equal(weights[name], value) for name, value in trainer.module.state_dict().items())
    assert all(p.grad is None for p in trainer.module.parameters())
    assert torch.equal(torch.get_rng_state(), random_state)


@pytest.mark.parametrize("began_with_bf16", [True, False])
def test_a_resumed_run_keeps_the_precision_it_began_with(
    synthetic_corpus: tuple[Path, Path],
    tiny_vocab: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    began_with_bf16: bool,
) -> None:
    """The probe decides once, when a run begins: a resumed run takes the precision from its checkpoint, whatever
    a probe would say now (timings vary, and a run that changed precision midway would not be the same run)."""
    from training import train as train_module

    cfg = tiny_config(*synthetic_corpus, tiny_vocab, steps=1, amp=True)  # the probe runs only where amp is asked
    monkeypatch.setattr(train_module, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(train_module.Trainer, "_bf16_pays", lambda self: began_with_bf16)
    first = train_module.Trainer(cfg, tmp_path / "run")
    first.build()
    first._choose_precision()
    assert first.use_amp is began_with_bf16
    checkpoint.save(tmp_path / "last.pt", first.state())

    def probe(self: object) -> bool:
        raise AssertionError("a resumed run probed again")

    monkeypatch.setattr(train_module.Trainer, "_bf16_pays", probe)
    resumed = train_module.Trainer(cfg, tmp_path / "run")
    resumed.build()
    resumed.resume(tmp_path / "last.pt")
    resumed._choose_precision()
    assert resumed.use_amp is began_with_bf16


def test_extra_files_are_trained_on_that_many_times_more(
    synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path
) -> None:
    from training.config import ConfigError, load_config
    from training.train import Trainer

    extra = tmp_path / "extra.tsv"
    lines = synthetic_corpus[0].read_text(encoding="utf-8").splitlines()[:7]
    extra.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    counts = {}
    for copies in (0, 3):
        cfg = tiny_config(*synthetic_corpus, tiny_vocab, steps=1)
        cfg.data.extra, cfg.data.extra_copies = [str(extra)], copies
        trainer = Trainer(cfg, tmp_path / f"run{copies}")
        trainer.load_data()
        counts[copies] = len(trainer.train)
    assert counts[3] - counts[0] == 3 * 7
    with pytest.raises(ConfigError, match="extra_copies"):
        load_config(overrides=["data.extra_copies=-1"])
    assert load_config(overrides=["data.extra=['a.tsv', 'b.tsv']"]).data.extra == ["a.tsv", "b.tsv"]
