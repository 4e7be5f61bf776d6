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


def test_each_plugin_command_is_found_in_the_module_that_defines_it() -> None:
    """The command -> module table the CLI uses to import only what a command needs matches the modules."""
    import importlib

    from training.cli import PLUGINS

    everything = subcommands(build_parser())
    for command, module in PLUGINS.items():
        own = subcommands(build_parser(command))
        assert command in own and own[command].format_help() == everything[command].format_help()
        registered = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(registered)
        assert command in registered.choices
    builtin = set(subcommands(build_parser("prepare")))
    assert set(everything) == builtin | set(PLUGINS), "a module registers a command the table does not name"


HEAVY = ("torch", "onnx", "onnxruntime", "polib", "lingua", "matplotlib")


def imported_by(code: str) -> set[str]:
    """Which of HEAVY a fresh interpreter has loaded after running ``code``."""
    probe = f"import sys\n{code}\nprint('loaded:', *(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(done.stdout.splitlines()[-1].split()[1:])


def test_a_command_imports_only_what_it_needs() -> None:
    """`prepare`, `vocab` and the corpus builder run without torch; training never loads onnx or onnxruntime."""
    needs = {"prepare": ("training.data", set()), "vocab": ("training.vocab", set()), "build-corpus": (None, {"polib"})}
    for command, (module, own) in needs.items():
        code = f"from training.cli import build_parser\nbuild_parser({command!r}).format_help()"
        if module:
            code += f"\nimport {module}"
        assert imported_by(code) == own, command
    assert imported_by("import training.train") == {"torch"}
