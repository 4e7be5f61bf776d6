"""What a run writes for people to look at, at each evaluation: TensorBoard scalars and a learning-curve PNG.

``RunBoard(run_dir)`` writes ``run_dir/tensorboard/`` (``tensorboard --logdir runs/``: training loss, learning
rate, tokens/s, dev loss, BLEU and chrF against the step) and ``run_dir/curve.png`` (dev BLEU and chrF against
training minutes, redrawn from ``evals.jsonl`` at every evaluation). Both are optional: without the
``tensorboard`` or ``matplotlib`` package the run trains as before and says once what it is not writing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class RunBoard:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self._writer: Any = None
        self._warned: set[str] = set()

    def _tensorboard(self) -> Any:
        if self._writer is None and "tensorboard" not in self._warned:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(str(self.run_dir / "tensorboard"))
            except ImportError:
                self._warned.add("tensorboard")
                log.info("tensorboard is not installed: no TensorBoard scalars (pip install tensorboard)")
        return self._writer

    def scalars(self, step: int, values: dict[str, float]) -> None:
        writer = self._tensorboard()
        if writer is not None:
            for name, value in values.items():
                writer.add_scalar(name, value, step)
            writer.flush()

    def curve(self) -> Path | None:
        """Redraw ``curve.png`` from ``evals.jsonl``; the path, or None without matplotlib or evaluations."""
        evals = [json.loads(line) for line in (self.run_dir / "evals.jsonl").open(encoding="utf-8") if line.strip()]
        if not evals:
            return None
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            if "matplotlib" not in self._warned:
                self._warned.add("matplotlib")
                log.info("matplotlib is not installed: no curve.png (pip install matplotlib)")
            return None
        minutes = [e.get("minutes", 0.0) for e in evals]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(minutes, [e["dev_bleu"] for e in evals], marker="o", label="dev BLEU")
        ax.plot(minutes, [e["dev_chrf"] for e in evals], marker="s", label="dev chrF")
        ax.set_xlabel("training minutes")
        ax.set_title(f"{self.run_dir.name}: step {evals[-1]['step']}")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = self.run_dir / "curve.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
