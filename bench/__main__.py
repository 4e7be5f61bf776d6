"""``python -m bench <command> [options]``: run one benchmark; without a command, list them."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

# command -> module. Grouped as in the docs: engine speed, server load, decoding options and quality,
# training experiments.
COMMANDS = {
    # engine speed
    "decode": "bench.decode",
    "bundle-speed": "bench.bundle_speed",
    "engine-ab": "bench.engine_ab",
    "peers": "bench.peers",
    "profile-decode": "bench.profile_decode",
    "search-cost": "bench.search_cost",
    "node-cost": "bench.node_cost",
    "host-step": "bench.host_step",
    "ban-rate": "bench.ban_rate",
    "batch-mates": "bench.batch_mates",
    "lanes": "bench.lanes",
    "gpu": "bench.gpu",
    "ort-beam-search": "bench.ort_beam_search",
    "attention": "bench.attention",
    "model-memory": "bench.model_memory",
    "shortlist": "bench.shortlist",
    "masked-softmax": "bench.masked_softmax",
    # server load
    "load": "bench.load",
    "running-sets": "bench.running_sets",
    "batch-wait": "bench.batch_wait",
    "overload": "bench.overload",
    "refusal-cost": "bench.refusal_cost",
    "soak": "bench.soak",
    "cache": "bench.cache",
    # decoding options and quality
    "option-sweep": "bench.option_sweep",
    "literals": "bench.literals",
    "markup": "bench.markup",
    "documents": "bench.documents",
    "glossary": "bench.glossary",
    "noisy-channel": "bench.noisy_channel",
    "langid": "bench.langid",
    "samples": "bench.samples",
    "casing": "bench.casing",
    "long-sentences": "bench.long_sentences",
    "wrapped": "bench.wrapped",
    # training experiments
    "learning-curve": "bench.learning_curve",
    "sweep": "bench.sweep",
    "size-sweep": "bench.size_sweep",
    "train-precision": "bench.train_precision",
    "greedy-cache": "bench.greedy_cache",
}


def summary(module: str) -> str:
    """The first line of a module's docstring, read without importing it (some import torch)."""
    path = Path(__file__).parent / (module.rsplit(".", 1)[1] + ".py")
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.splitlines()[0] if doc else ""


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m bench COMMAND [options]   (python -m bench COMMAND --help for its options)", ""]
    lines += [f"  {name:<{width}}  {summary(module)}" for name, module in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"unknown benchmark {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command])
    sys.argv = [f"python -m bench {command}", *rest]  # argparse's prog in usage and errors
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
