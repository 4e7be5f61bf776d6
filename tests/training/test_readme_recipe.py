"""The README's "Train your own model" recipe, run as written on a small generated corpus.

The commands are read from the README's code block and run one by one in a scratch directory, as a user would
type them. The only changes are the ones a test cannot do without: the `tiny` preset and a step limit instead
of two hours of the `small` model, and `make serve` started as the command it runs (`python -m service`) on a
free port. Then: every step succeeded, the run drew its curve and TensorBoard events, the bundle serves, and
the BLEU the recipe printed is the BLEU of the server's own answers on the same test sentences.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from testkit.synthetic import make_pairs
from tests.service.servers import process_server, wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def readme_recipe() -> list[str]:
    """The commands of the first bash block under "## Train your own model", continuation lines joined."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Train your own model", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the README's training section has no bash block"
    joined = block.group(1).replace("\\\n", " ")
    commands = [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [c for c in commands if c]


def adapted(words: list[str]) -> list[str]:
    """A README `python -m training ...` command as this test runs it."""
    assert words[:3] == ["python", "-m", "training"], words
    out = [sys.executable, *words[1:]]
    if "train" == words[3]:
        assert out[out.index("--preset") + 1] == "small"
        out[out.index("--preset") + 1] = "tiny"  # seconds, not hours
        out += ["--set", "train.max_steps=500", "--set", "train.threads=1"]
    return out


def test_the_readme_training_recipe_runs_end_to_end_and_its_bleu_is_the_servers(tmp_path: Path) -> None:
    commands = readme_recipe()
    assert commands[0].startswith("make install-train"), "the recipe starts by installing the train extra"
    assert commands[-1] == "MT_BUNDLE=models/mine make serve"
    (tmp_path / "corpus.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in make_pairs(3000, seed=7)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    printed: dict[str, str] = {}
    for command in commands[1:-1]:  # the install is CI's setup; `make serve` comes last
        words = shlex.split(command)
        done = subprocess.run(adapted(words), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        printed[words[3]] = done.stdout

    run = tmp_path / "runs/mine"
    assert (run / "curve.png").stat().st_size > 1000, "no learning curve was drawn"
    assert list((run / "tensorboard").glob("events.out.tfevents.*")), "no TensorBoard events were written"
    scores = json.loads(printed["evaluate-bundle"])
    recipe = scores["test.tsv"]

    pairs = [line.split("\t") for line in (tmp_path / "data/mine/test.tsv").read_text().splitlines()]
    assert len(pairs) == recipe["sentences"] > 0
    bundle = tmp_path / "models/mine"
    with process_server([], tmp_path / "server.log", env={"MT_BUNDLE": str(bundle)}) as server:
        wait_until(lambda: server.client.get("/readyz").status_code == 200, timeout=60, what="the bundle to load")
        hyps: list[str] = []
        for start in range(0, len(pairs), 32):
            texts = [s for s, _ in pairs[start : start + 32]]
            r = server.client.post("/translate", json={"text": texts})
            assert r.status_code == 200, r.text
            hyps += [t["text"] for t in r.json()["translations"]]
    refs = [t for _, t in pairs]
    served = round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    assert served == recipe["bleu"], f"the recipe printed BLEU {recipe['bleu']}, the server's answers score {served}"
    assert recipe["bleu"] > 50, "the tiny model should have learnt the synthetic task"
