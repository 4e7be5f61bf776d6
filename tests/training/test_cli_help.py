"""Every ``python -m training`` option explains itself and shows its default; ``train --help`` lists the keys."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path

from training.cli import build_parser
from training.config import Config

ROOT = Path(__file__).resolve().parents[2]


def test_every_option_has_help_and_a_shown_default() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        silent = [a.dest for a in command._actions if a.help is None and a.dest != "help"]
        assert silent == [], f"{name}: options without help: {silent}"
        formatter = command._get_formatter()
        assert command.format_help()
        for action in command._actions:
            if (
                action.option_strings
                and action.default not in (None, argparse.SUPPRESS, False)
                and action.dest != "help"
            ):
                shown = formatter._get_help_string(action) % {"default": action.default}  # type: ignore[attr-defined]
                assert f"(default: {action.default})" in shown, f"{name} {action.option_strings[0]}"


def test_train_help_lists_every_setting() -> None:
    text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()  # type: ignore[union-attr]
    for section in dataclasses.fields(Config):
        for item in dataclasses.fields(getattr(Config(), section.name)):
            assert f"{section.name}.{item.name} = " in text


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_each_command_module_registers_what_the_cli_lists() -> None:
    """Every command the CLI lists is built in or registered by one of the modules cli.py imports by name."""
    from training.cli import COMMAND_MODULES

    registered: dict[str, str] = {}
    for module in COMMAND_MODULES:
        own = argparse.ArgumentParser().add_subparsers()
        module.register(own)
        for name in own.choices:
            assert name not in registered, f"{name} is registered twice"
            registered[name] = module.__name__
    listed = set(subcommands(build_parser()))
    assert set(registered) <= listed
    assert {"build-corpus", "build-monolingual", "export", "import-bundle", "import-marian", "graft"} <= set(registered)


HEAVY = ("torch", "onnx", "onnxruntime", "polib", "lingua", "matplotlib")


def imported_by(code: str) -> set[str]:
    """Which of HEAVY a fresh interpreter has loaded after running ``code``."""
    probe = f"import sys\n{code}\nprint('loaded:', *(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(done.stdout.splitlines()[-1].split()[1:])


def test_a_command_imports_only_what_it_needs() -> None:
    """`prepare`, `vocab` and the corpus builder run without torch; training never loads onnx or onnxruntime."""
    assert imported_by("from training.cli import build_parser\nbuild_parser().format_help()") == set()
    for module in ("training.data", "training.vocab", "training.corpus.commands"):
        assert imported_by(f"import {module}") == set(), module
    assert imported_by("import training.train") == {"torch"}
