"""Distributed training under torchrun: two CPU processes talking through gloo, launched with the README's line.

The ranks must train on disjoint batches, hold the same weights at the end, and a run killed mid-way must resume
to the very weights of the uninterrupted run (each rank's data position and random state restored).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from training import checkpoint

ROOT = Path(__file__).resolve().parents[2]
STEPS = 48


def readme_torchrun() -> list[str]:
    """The README's multi-process line, up to the `train` subcommand; the test supplies the run's own settings."""
    lines = [line.strip() for line in (ROOT / "README.md").read_text().splitlines()]
    found = [line for line in lines if line.startswith("torchrun ") and " -m training train " in line]
    assert len(found) == 1, f"the README should show one torchrun training line, found {found}"
    words = shlex.split(found[0])
    words = words[: words.index("train") + 1]
    assert "--nproc_per_node" in words and words[words.index("--nproc_per_node") + 1] == "2"
    return [sys.executable, "-m", "torch.distributed.run", *words[1:]]  # torchrun is this module's script


def command(run: Path, corpus: tuple[Path, Path], vocab: Path) -> list[str]:
    sets = {
        "data.train": corpus[0],
        "data.dev": corpus[1],
        "data.vocab": vocab,
        "model.dropout": 0.1,  # so that each rank's random state matters to the result
        "train.max_steps": STEPS,
        "train.save_every": 8,
        "train.log_every": 8,
        "train.eval_every": 100_000,
        "train.batch_tokens": 256,
        "train.threads": 1,
        "train.trace": "true",
        "train.amp": "false",  # the whole and the killed run each probe bf16 on a CPU with it, and may decide apart
    }
    cmd = [*readme_torchrun(), str(run), "--preset", "tiny"]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={value}"]
    return cmd


def launch(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen[bytes], log: Path) -> None:
    try:
        rc = proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert rc == 0, log.read_text()[-4000:]


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wait_gone(pids: list[int], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    for pid in pids:
        while alive(pid):
            assert time.monotonic() < deadline, f"process {pid} outlived SIGKILL"
            time.sleep(0.01)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper is dead enough: it holds no file and runs no step)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def trace(run: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (run / f"trace-rank{rank}.jsonl").read_text().splitlines()]


def checksum(weights: dict[str, torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(weights.items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def whole_run(synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("ddp") / "whole"
    log = run.parent / "whole.log"
    finish(launch(command(run, synthetic_corpus, tiny_vocab), log), log)
    return run


def test_ranks_train_on_disjoint_batches_and_end_with_the_same_weights(whole_run: Path) -> None:
    ranks = [trace(whole_run, rank) for rank in (0, 1)]
    for records in ranks:
        steps = [r["step"] for r in records if "batches" in r]
        assert steps == list(range(1, STEPS + 1))
    seen = [{tuple(b) for r in records if "batches" in r for b in r["batches"]} for records in ranks]
    assert len(seen[0]) == len(seen[1]) == STEPS, "each rank trains on a new batch every step"
    assert not seen[0] & seen[1], "the two ranks trained on the same batch"
    finals = [records[-1]["weights_sha256"] for records in ranks]
    assert finals[0] == finals[1], "the ranks' weights drifted apart"
    saved = checkpoint.load(whole_run / "last.pt")
    assert checksum(saved["model"]) == finals[0]
    assert saved["train_state"]["position"]["step"] == STEPS


def test_a_killed_distributed_run_resumes_to_the_uninterrupted_weights(
    whole_run: Path, synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path
) -> None:
    run, log = tmp_path / "broken", tmp_path / "broken.log"
    cmd = command(run, synthetic_corpus, tiny_vocab)
    proc = launch(cmd, log)
    deadline = time.monotonic() + 240
    while not (run / "last.pt").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.02)
    doomed = [proc.pid, *descendants(proc.pid)]  # torchrun starts each rank in a session of its own
    for pid in doomed:
        os.kill(pid, signal.SIGKILL)
    proc.wait()
    wait_gone(doomed)
    killed_at = checkpoint.load(run / "last.pt")["train_state"]["position"]["step"]
    assert 8 <= killed_at < STEPS, f"the kill came too late to test a resume (last.pt at step {killed_at})"

    finish(launch(cmd, log), log)
    assert f"resumed from {run / 'last.pt'} at step {killed_at}" in log.read_text()
    resumed = [trace(run, rank) for rank in (0, 1)]
    whole = [trace(whole_run, rank) for rank in (0, 1)]
    for rank in (0, 1):
        # the steps after the checkpoint train on the batches the uninterrupted run had at those steps
        after = {r["step"]: r["batches"] for r in resumed[rank] if "batches" in r and r["step"] > killed_at}
        expected = {r["step"]: r["batches"] for r in whole[rank] if "batches" in r and r["step"] > killed_at}
        assert after == expected
        assert resumed[rank][-1]["weights_sha256"] == whole[rank][-1]["weights_sha256"]
    a = checkpoint.load(whole_run / "last.pt")["model"]
    b = checkpoint.load(run / "last.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
