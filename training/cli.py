"""``python -m training <subcommand>``: one entry point for the whole offline workflow."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from core.sentences import PART_PIECES
from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE
from training import back_translate, compare, truecase
from training.config import PRESETS, ConfigError, load_config
from training.corpus import commands as corpus_commands
from training.export import commands as export_commands
from training.interop import commands as interop_commands

# Subcommands defined beside the code they run; each module adds its own through register(subparsers). These
# modules hold arguments only (their handlers import the heavy parts when they run), so `prepare` loads no
# torch and `train` no onnx.
COMMAND_MODULES = (corpus_commands, back_translate, export_commands, interop_commands, truecase, compare)


def _prepare(args: argparse.Namespace) -> int:
    from training.data import prepare

    summary = prepare(
        args.out,
        args.train,
        target=args.target,
        dev=args.dev,
        test=args.test,
        dev_size=args.dev_size,
        test_size=args.test_size,
        max_words=args.max_words,
        max_ratio=args.max_ratio,
        seed=args.seed,
    )
    print(json.dumps(summary, indent=2))
    return 0


def _reverse_corpus(args: argparse.Namespace) -> int:
    from training.data import reverse_corpus

    print(json.dumps(reverse_corpus(args.corpus, args.out), indent=2))
    return 0


def _vocab(args: argparse.Namespace) -> int:
    from training.vocab import train_vocab

    tok = train_vocab(args.train, args.out, args.size, args.model_type, seed=args.seed)
    print(f"wrote {args.out}/spm.model and vocab.json ({len(tok)} pieces)")
    if len(tok) < args.size:
        print(
            f"note: asked for {args.size} pieces, the corpus gave {len(tok)}: sentencepiece stops when the text has "
            "no more to learn (a small corpus). The vocabulary works; a smaller --size says so up front.",
            file=sys.stderr,
        )
    return 0


def _train(args: argparse.Namespace) -> int:
    from training.train import train

    config = load_config(args.preset, args.config, args.set)
    pos = train(config, args.run_dir)
    print(f"stopped at step {pos.step} after {pos.elapsed / 60:.1f} min; best dev chrF {pos.best_chrf:.2f}")
    return 0


def _average(args: argparse.Namespace) -> int:
    from training.average import average, last_checkpoints

    paths: list[str | Path] = list(args.checkpoints or last_checkpoints(args.run_dir, args.last))
    out = average(paths, args.out)
    print(f"averaged {len(paths)} checkpoints into {out}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from training.evaluate import evaluate

    scores = evaluate(
        args.checkpoint,
        args.test,
        args.hypotheses,
        args.beam,
        args.length_penalty,
        limit=args.limit,
        no_repeat_ngram=args.no_repeat_ngram,
    )
    print(json.dumps(scores, indent=2))
    return 0


def _evaluate_bundle(args: argparse.Namespace) -> int:
    from training.evaluate import evaluate_bundle

    results = evaluate_bundle(
        args.bundle,
        args.tests,
        args.beam,
        threads=args.threads,
        hypotheses_dir=args.hypotheses,
        no_repeat_ngram=args.no_repeat_ngram,
        length_penalty=args.length_penalty,
        graphs=args.graphs,
        part_pieces=args.part_pieces,
        split_sentences=args.split_sentences,
    )
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


def _config_keys() -> str:
    """Every key --set and --config take, with its default (before the preset's own values)."""
    import dataclasses

    from training.config import Config

    lines = ["settings (--set SECTION.KEY=VALUE; defaults before the preset's own values):"]
    for section in dataclasses.fields(Config):
        for item in dataclasses.fields(getattr(Config(), section.name)):
            lines.append(f"  {section.name}.{item.name} = {getattr(getattr(Config(), section.name), item.name)!r}")
    return "\n".join(lines)


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written, every option with its default."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m training",
        description="Train, evaluate and export Transformer translation models.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "prepare",
        help="clean parallel text and split off dev/test sets",
        description="Read a TSV (source<TAB>target) or two aligned text files, drop "
        "empty/identical/overlong/badly proportioned/duplicate pairs, split dev/test "
        "(or take given ones) and write train.tsv, dev.tsv, test.tsv, report.json.",
    )
    p.add_argument("train", help="TSV file, or the source-side text file when --target is given")
    p.add_argument("--target", help="target-side text file aligned line by line with TRAIN")
    p.add_argument("--dev", help="use this TSV as the dev set instead of splitting one off")
    p.add_argument("--test", help="use this TSV as the test set instead of splitting one off")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--dev-size", type=int, default=1000, help="dev pairs to split off (a tenth of a small corpus)")
    p.add_argument("--test-size", type=int, default=1000, help="test pairs to split off (a tenth of a small corpus)")
    p.add_argument(
        "--max-words", type=int, default=150, help="drop pairs with a side longer than this (words; default 150)"
    )
    p.add_argument(
        "--max-ratio",
        type=float,
        default=3.0,
        help="drop pairs whose longer side has more than this many times the words of the shorter",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed")
    p.set_defaults(func=_prepare)

    p = sub.add_parser(
        "reverse-corpus",
        help="write a corpus the other way round (e.g. data/en-de -> data/de-en)",
        description="Swap the columns of every TSV of CORPUS (train, dev, test.*, eval-*) into OUT, and drop "
        "training pairs whose new source side is held out in a dev, test or reserved set.",
    )
    p.add_argument("corpus", help="corpus directory, e.g. data/en-de")
    p.add_argument("--out", required=True, help="output directory, e.g. data/de-en")
    p.set_defaults(func=_reverse_corpus)

    p = sub.add_parser(
        "vocab",
        help="train a joint sentencepiece vocabulary",
        description="Learn a sentencepiece model from both sides of a TSV; writes "
        "spm.model and vocab.json (piece/id table with pad=0 unk=1 bos=2 eos=3).",
    )
    p.add_argument("train", help="training TSV")
    p.add_argument("--out", required=True, help="vocabulary directory")
    p.add_argument("--size", type=int, default=8000, help="vocabulary size")
    p.add_argument("--model-type", choices=["unigram", "bpe"], default="unigram", help="sentencepiece's algorithm")
    p.add_argument("--seed", type=int, default=1, help="random seed")
    p.set_defaults(func=_vocab)

    p = sub.add_parser(
        "train",
        epilog=_config_keys(),
        help="train a model (resumes from RUN_DIR/last.pt if present)",
        description="Train with token-count batches, label smoothing and the inverse-"
        "sqrt schedule. Settings: --preset, then --config FILE.toml, then --set "
        "section.key=value overrides. Under torchrun it trains on every GPU.",
    )
    p.add_argument("run_dir", help="directory for checkpoints, logs and evals.jsonl")
    p.add_argument(
        "--preset", choices=sorted(PRESETS), default="small", help="tiny (tests), small (CPU), base (the paper's)"
    )
    p.add_argument("--config", help="TOML file with [model], [data], [train] sections")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one setting, e.g. --set train.max_minutes=120",
    )
    p.set_defaults(func=_train)

    p = sub.add_parser("average", help="average the weights of several checkpoints")
    p.add_argument("--run-dir", help="take the last --last checkpoints of this run")
    p.add_argument("--last", type=int, default=5, help="how many of the run's last checkpoints")
    p.add_argument("--checkpoints", nargs="*", help="explicit checkpoint files")
    p.add_argument("--out", required=True, help="the averaged checkpoint to write")
    p.set_defaults(func=_average)

    p = sub.add_parser(
        "evaluate",
        help="translate a test TSV and print BLEU and chrF",
        description="Translate the source side of a TSV with the PyTorch reference "
        "decoder and score against the target side with sacrebleu.",
    )
    p.add_argument("checkpoint", help="a checkpoint (.pt), e.g. the run's averaged.pt")
    p.add_argument("test", help="TSV test file")
    p.add_argument("--hypotheses", help="write the translations here, one per line")
    p.add_argument("--beam", type=int, default=4, help="beam width (the server's default)")
    p.add_argument(
        "--length-penalty",
        type=float,
        default=DEFAULT_LENGTH_PENALTY,
        help="rank hypotheses by log-probability / length ** A (the server's default)",
    )
    p.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    p.add_argument(
        "--no-repeat-ngram",
        type=int,
        default=DEFAULT_NO_REPEAT_NGRAM_SIZE,
        metavar="N",
        help="forbid repeated n-grams of N pieces (0: off; the server's default)",
    )
    p.set_defaults(func=_evaluate)

    p = sub.add_parser(
        "evaluate-bundle",
        help="score an exported bundle through the service's ONNX engine",
        description="Translate each test TSV with the same engine the server uses and print "
        "BLEU and chrF (sacrebleu) per file.",
    )
    p.add_argument("bundle", help="a model bundle directory")
    p.add_argument("tests", nargs="+", help="TSV test files")
    p.add_argument("--beam", type=int, default=4, help="beam width (the server's default)")
    p.add_argument("--threads", type=int, default=0, help="onnxruntime threads (0: onnxruntime decides)")
    p.add_argument("--hypotheses", help="directory for the translations, one .hyp file per test file")
    p.add_argument("--json", help="also write the scores to this JSON file")
    p.add_argument(
        "--no-repeat-ngram",
        type=int,
        default=None,
        metavar="N",
        help="forbid repeated n-grams of N pieces (0: off; default: the server's default)",
    )
    p.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        metavar="A",
        help="rank hypotheses by log-probability / length ** A (default: the server's default)",
    )
    p.add_argument(
        "--graphs",
        default="auto",
        help="graph set: auto (the provider's), main, or a variant such as cuda (the GPU graphs, run here)",
    )
    p.add_argument(
        "--part-pieces",
        type=int,
        default=PART_PIECES,
        metavar="N",
        help="translate a line of more source pieces in parts of at most N, as the server does (MT_PART_PIECES; "
        "docs/long-sentences.md); 0: only lines longer than the model takes",
    )
    p.add_argument(
        "--split-sentences",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="cut each line into sentences as the server does by default; --no-split-sentences sends each line whole "
        "(the server's split_sentences: false, and evaluate-bundle before session 31)",
    )
    p.set_defaults(func=_evaluate_bundle)

    for module in COMMAND_MODULES:
        module.register(sub)
    for subparser in sub.choices.values():
        subparser.formatter_class = _Help
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except (ConfigError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
