"""Every `python -m bench ...` command written in the README and the docs parses as written: the benchmark
exists and takes those arguments. (Running them is the benchmarks' job: minutes to hours each.)"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # written documents, not reports


def documented() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        blocks = [m.group(1) for m in re.finditer(r"```[a-z]*\n(.*?)```", text, re.S)]
        prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
        spans = [m.group(1) for m in re.finditer(r"`[^`]*?(python -m bench [^`]*)`", prose)]
        for block in blocks:
            lines = block.replace("\\\n", " ").splitlines()
            spans += [line[line.index("python -m bench") :] for line in lines if "python -m bench" in line]
        found += [(document.name, " ".join(span.split("#")[0].split())) for span in spans]
    return found


class Parsed(Exception):
    pass


@pytest.mark.parametrize(("document", "command"), documented())
def test_documented_benchmark_command_parses(document: str, command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    words = shlex.split(command)[3:]
    assert words and words[0] in COMMANDS, f"{document}: no benchmark {words[:1]}"
    if len(words) == 1:
        return  # the benchmark named, not a command line
    original = argparse.ArgumentParser.parse_args

    def parse_only(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        original(self, args, namespace)  # exits with status 2 on arguments the benchmark does not take
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    with pytest.raises(Parsed):
        importlib.import_module(COMMANDS[words[0]]).main(words[1:])
