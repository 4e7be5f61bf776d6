"""`python -m bench`: one command per benchmark module, and benchmarks never reach into the tests."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

from bench.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
SHARED = {"__init__", "__main__", "loadtools", "variants"}


def test_every_benchmark_module_is_a_command_with_a_main() -> None:
    modules = {p.stem for p in (ROOT / "bench").glob("*.py")} - SHARED
    assert {m.rsplit(".", 1)[1] for m in COMMANDS.values()} == modules
    for name, module in COMMANDS.items():
        assert name == module.rsplit(".", 1)[1].replace("_", "-")
        assert callable(importlib.import_module(module).main), name


def test_python_m_bench_lists_the_commands_and_runs_one() -> None:
    listing = subprocess.run([sys.executable, "-m", "bench"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in COMMANDS:
        assert f"  {name} " in listing.stdout
    help_text = subprocess.run(
        [sys.executable, "-m", "bench", "literals", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert help_text.stdout.startswith("usage: python -m bench literals")
    wrong = subprocess.run([sys.executable, "-m", "bench", "nope"], cwd=ROOT, capture_output=True, text=True)
    assert wrong.returncode == 2 and "unknown benchmark 'nope'" in wrong.stderr


def test_benchmarks_import_neither_the_tests_nor_patch_the_import_path() -> None:
    for path in sorted((ROOT / "bench").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [
            node.module if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        ]
        assert not [m for m in imported if m and m.split(".")[0] == "tests"], path.name
        patches = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "insert" and ast.unparse(node.value) == "sys.path"
        ]
        # engine_ab loads the engine of another code tree on purpose: that is its measurement
        assert not patches or path.name == "engine_ab.py", f"{path.name} patches sys.path"
        # a benchmark that runs itself in a subprocess does so as `python -m bench ...`: a file path would
        # start Python without the repository on its path
        assert "sys.executable, __file__" not in path.read_text(encoding="utf-8"), path.name
