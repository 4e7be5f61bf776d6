"""Training variants side by side, shared by the training experiments (``sweep``, ``size-sweep``): each variant
is the recipe plus ``--set`` overrides, trained by ``python -m training train`` in a process of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.loadtools import ROOT

RECIPE = "recipes/en-de-small.toml"


def slug(name: str) -> str:
    """A variant's run directory name: "d256 6+2 lr0.8" -> "d256_6-2_lr08"."""
    return name.replace(" ", "_").replace("+", "-").replace(".", "")


def train_command(run_dir: Path, sets: list[str], recipe: str = RECIPE) -> list[str]:
    """``python -m training train RUN_DIR --preset small --config RECIPE --set ...``."""
    command = [sys.executable, "-m", "training", "train", str(run_dir), "--preset", "small", "--config", recipe]
    for setting in sets:
        command += ["--set", setting]
    return command


def run_all(jobs: list[tuple[list[str], Path, dict[str, str] | None]], parallel: int) -> list[int]:
    """Run ``(command, log file, environment)`` jobs, ``parallel`` at a time, in the repository; their exit codes
    in job order. A failed run is reported and the others go on."""
    pending = list(enumerate(jobs))
    running: list[tuple[int, subprocess.Popen[bytes]]] = []
    codes = [0] * len(jobs)
    while pending or running:
        while pending and len(running) < parallel:
            index, (command, log, env) = pending.pop(0)
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("wb") as out:
                running.append(
                    (index, subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT))
                )
        index, process = running.pop(0)
        codes[index] = process.wait()
        if codes[index]:
            print(f"a run failed ({codes[index]}): see {jobs[index][1]}", file=sys.stderr)
    return codes
