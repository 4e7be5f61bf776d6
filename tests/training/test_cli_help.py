"""Every ``python -m training`` option explains itself and shows its default; ``train --help`` lists the keys."""

from __future__ import annotations

import argparse
import dataclasses

from training.cli import build_parser
from training.config import Config


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
