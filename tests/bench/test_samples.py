"""bench samples: the German sets line up with the English ones, and a run takes one source language."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import samples

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "en-de" / "manifest.json"


def _bundle(root: Path, name: str, source: str) -> Path:
    """A directory with the shipped model's manifest, translating from ``source`` (its graphs are not needed)."""
    path = root / name
    path.mkdir()
    manifest = json.loads(SHIPPED.read_text(encoding="utf-8")) | {"source_language": source}
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["help", "everyday"])
def test_each_german_line_translates_the_english_line_beside_it(name: str) -> None:
    english, german = samples.SETS[name, "en"], samples.SETS[name, "de"]
    assert len(german) == len(english)
    assert len(set(german)) == len(german)
    # the sentences end alike (a question stays a question), which a shifted list would not keep
    assert [s[-1] for s in german] == [s[-1] for s in english]


def test_the_set_follows_the_bundles_source_language(tmp_path: Path) -> None:
    de = [_bundle(tmp_path, "a", "de"), _bundle(tmp_path, "b", "de")]
    assert samples.source_language(de) == "de"
    assert samples.source_language([_bundle(tmp_path, "c", "en")]) == "en"


@pytest.mark.parametrize("sources", [["en", "de"], ["fr"]])
def test_bundles_from_other_or_mixed_languages_are_refused(tmp_path: Path, sources: list[str]) -> None:
    bundles = [_bundle(tmp_path, f"b{i}", source) for i, source in enumerate(sources)]
    with pytest.raises(SystemExit, match="translate from English or from German"):
        samples.source_language(bundles)
