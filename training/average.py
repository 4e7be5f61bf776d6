"""Checkpoint averaging: the element-wise mean of the last N checkpoints' weights (paper, section 6.1)."""

from __future__ import annotations

from pathlib import Path

from training import checkpoint


def average(paths: list[str | Path], out: str | Path) -> Path:
    if not paths:
        raise checkpoint.CheckpointError("no checkpoints to average")
    first = checkpoint.load(paths[0])
    total = {k: v.double().clone() if v.is_floating_point() else v for k, v in first["model"].items()}
    for path in paths[1:]:
        payload = checkpoint.load(path)
        if payload["config"]["model"] != first["config"]["model"]:
            raise checkpoint.CheckpointError(f"{path} has a different model config than {paths[0]}")
        for k, v in payload["model"].items():
            if v.is_floating_point():
                total[k] += v.double()
    averaged = {
        k: (v / len(paths)).to(first["model"][k].dtype) if v.is_floating_point() else v for k, v in total.items()
    }
    result = {
        "config": first["config"],
        "model": averaged,
        "vocab_files": first["vocab_files"],
        "averaged_from": [str(p) for p in paths],
    }
    checkpoint.save(out, result)
    return Path(out)


def last_checkpoints(run_dir: str | Path, n: int) -> list[Path]:
    found = sorted(Path(run_dir).glob("checkpoint-*.pt"))
    if not found:
        raise checkpoint.CheckpointError(f"{run_dir} holds no checkpoint-*.pt files")
    return found[-n:]
