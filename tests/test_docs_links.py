"""Every link and every `docs/...` path in the README and the docs points at a file that exists."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "deploy").rglob("*.md"))]


def expand(path: str) -> list[str]:
    """Shell braces, as the docs write a family of reports: a/{b,c}.json -> a/b.json, a/c.json."""
    parts = re.split(r"\{([^}]*)\}", path)
    options = [part.split(",") if i % 2 else [part] for i, part in enumerate(parts)]
    return ["".join(choice) for choice in itertools.product(*options)]


def broken(document: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", document.read_text(encoding="utf-8"), flags=re.S)  # code blocks: examples
    found = []
    for match in re.finditer(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", text)):  # `[a](b)` in code is markup
        target = match.group(1)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (document.parent / target.split("#")[0]).exists():
            found.append(target)
    for match in re.finditer(r"(?<![\w/.:-])(docs/[\w./+{},-]+)", text):  # `git show C:docs/...` is history
        for path in expand(match.group(1).rstrip(".,);:")):
            if not any((ROOT / (path + ext)).exists() for ext in ("", ".md", ".json")):
                found.append(path)
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_paths_resolve(document: Path) -> None:
    assert broken(document) == []
