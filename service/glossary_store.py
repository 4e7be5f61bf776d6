"""The glossaries clients create through DeepL's API (service/routes/deepl.py), kept by id.

A glossary is DeepL's: a name and one or more *dictionaries*, each the entries of one language pair (v3 glossaries
hold several, v2 ones exactly one). Its entries become the request's glossary (inference/glossary.py) when a request
names it. With a directory (MT_GLOSSARY_DIR) the directory is the truth: one JSON file per glossary, written whole
before the answer and read again when it changes, so glossaries outlive a restart and replicas sharing the directory
see each other's at once; without one, they live in memory.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inference.glossary import Glossary, GlossaryError

MAX_GLOSSARIES = 1000
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""A glossary id (uuid4): nothing else names a file in the directory."""


class StoreError(ValueError):
    """A glossary or entries the server cannot keep; the message says why."""


@dataclass(frozen=True)
class Dictionary:
    """One language pair's entries (ISO 639-1 codes, as the models are named)."""

    source_lang: str
    target_lang: str
    entries: dict[str, str]

    def __post_init__(self) -> None:
        try:
            Glossary(self.entries)
        except GlossaryError as err:
            raise StoreError(f"Invalid glossary entries ({self.source_lang}->{self.target_lang}): {err}") from None

    def info(self) -> dict[str, Any]:
        return {"source_lang": self.source_lang, "target_lang": self.target_lang, "entry_count": len(self.entries)}

    def tsv(self) -> str:
        return "\n".join(f"{source}\t{target}" for source, target in self.entries.items())


@dataclass(frozen=True)
class StoredGlossary:
    glossary_id: str
    name: str
    creation_time: str
    dictionaries: tuple[Dictionary, ...]

    def __post_init__(self) -> None:
        pairs = [(d.source_lang, d.target_lang) for d in self.dictionaries]
        twice = next((pair for pair in pairs if pairs.count(pair) > 1), None)
        if twice is not None:
            raise StoreError(f"Two dictionaries for {twice[0]}->{twice[1]}: a glossary holds one per language pair.")

    @classmethod
    def new(cls, name: str, dictionaries: list[Dictionary]) -> StoredGlossary:
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return cls(str(uuid.uuid4()), name, now, tuple(dictionaries))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredGlossary:
        dictionaries = tuple(Dictionary(**d) for d in data["dictionaries"])
        return cls(data["glossary_id"], data["name"], data["creation_time"], dictionaries)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def dictionary(self, source: str, target: str) -> Dictionary | None:
        return next((d for d in self.dictionaries if (d.source_lang, d.target_lang) == (source, target)), None)

    def with_dictionaries(self, dictionaries: list[Dictionary]) -> StoredGlossary:
        return dataclasses.replace(self, dictionaries=tuple(dictionaries))

    def v3_info(self) -> dict[str, Any]:
        return {
            "glossary_id": self.glossary_id,
            "name": self.name,
            "dictionaries": [d.info() for d in self.dictionaries],
            "creation_time": self.creation_time,
        }

    def v2_info(self) -> dict[str, Any] | None:
        """DeepL's v2 shape, which has room for one language pair: None for a glossary with several."""
        if len(self.dictionaries) != 1:
            return None
        only = self.dictionaries[0]
        return {
            "glossary_id": self.glossary_id,
            "name": self.name,
            "ready": True,
            **only.info(),
            "creation_time": self.creation_time,
        }


def parse_entries(text: str, entries_format: str) -> dict[str, str]:
    """DeepL's glossary entries: ``source<TAB>target`` lines (tsv) or ``source,target`` rows (csv, quoted as CSV
    is); blank lines skipped, terms stripped, a source term twice refused."""
    if entries_format == "tsv":
        rows = [line.split("\t") for line in text.splitlines()]
    elif entries_format == "csv":
        rows = list(csv.reader(io.StringIO(text)))
    else:
        raise StoreError(f"Value for 'entries_format' not supported: {entries_format!r}; use tsv or csv")
    entries: dict[str, str] = {}
    for number, row in enumerate(rows, 1):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) not in (2, 4):  # DeepL's CSV may add the two language codes
            separator = "a tab" if entries_format == "tsv" else "a comma"
            raise StoreError(f"Invalid glossary entries: entry {number} is not two terms separated by {separator}")
        source, target = row[0].strip(), row[1].strip()
        if source in entries:
            raise StoreError(f"Invalid glossary entries: entry {number} repeats the source term {source!r}")
        entries[source] = target
    if not entries:
        raise StoreError("Invalid glossary entries: there are none")
    return entries


class GlossaryStore:
    """Glossaries by id, in ``directory`` when there is one, else in memory (the module's docstring)."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self._glossaries: dict[str, StoredGlossary] = {}
        self._read_at: dict[str, int] = {}
        """A file's modification time when it was read (files are replaced whole, never edited in place)."""
        self._lock = threading.Lock()
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            for path in sorted(directory.glob("*.json")):
                self._read(path)  # a file edited by hand into something unusable stops the server, named

    def _read(self, path: Path) -> StoredGlossary:
        modified = path.stat().st_mtime_ns
        if self._read_at.get(path.stem) == modified:
            return self._glossaries[path.stem]
        try:
            stored = StoredGlossary.from_json(json.loads(path.read_text(encoding="utf-8")))
            if stored.glossary_id != path.stem:
                raise ValueError(f"the file holds glossary {stored.glossary_id!r}")
        except (ValueError, TypeError, KeyError) as err:
            raise ValueError(f"{path.name}: {err}") from None
        self._glossaries[path.stem], self._read_at[path.stem] = stored, modified
        return stored

    def _write(self, glossary: StoredGlossary) -> None:
        if self.directory is None:
            self._glossaries[glossary.glossary_id] = glossary
            return
        path = self.directory / f"{glossary.glossary_id}.json"
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(glossary.to_json(), ensure_ascii=False), encoding="utf-8")
        os.replace(partial, path)
        self._read(path)

    def _forget(self, glossary_id: str) -> None:
        self._glossaries.pop(glossary_id, None)
        self._read_at.pop(glossary_id, None)

    def __len__(self) -> int:
        return len(self.all())

    def get(self, glossary_id: str) -> StoredGlossary | None:
        with self._lock:
            if self.directory is None:
                return self._glossaries.get(glossary_id)
            if not _ID.fullmatch(glossary_id):
                return None
            try:
                return self._read(self.directory / f"{glossary_id}.json")
            except FileNotFoundError:
                self._forget(glossary_id)
                return None

    def all(self) -> list[StoredGlossary]:
        with self._lock:
            if self.directory is not None:
                present = set()
                for path in self.directory.glob("*.json"):
                    try:
                        self._read(path)
                        present.add(path.stem)
                    except (OSError, ValueError):  # deleted meanwhile, or not one of ours: not listed
                        continue
                for gone in set(self._glossaries) - present:
                    self._forget(gone)
            return sorted(self._glossaries.values(), key=lambda g: g.creation_time)

    def named(self, name: str) -> StoredGlossary | None:
        """The first glossary of that name (Amazon's and Google's APIs name glossaries; DeepL's gives them ids)."""
        return next((g for g in self.all() if g.name == name), None)

    def add(self, glossary: StoredGlossary) -> None:
        if len(self) >= MAX_GLOSSARIES:
            raise StoreError(f"This server keeps at most {MAX_GLOSSARIES} glossaries: delete one first.")
        with self._lock:
            self._write(glossary)

    def replace(self, glossary: StoredGlossary) -> bool:
        """Store a changed glossary; False if it was deleted meanwhile."""
        if self.get(glossary.glossary_id) is None:
            return False
        with self._lock:
            self._write(glossary)
            return True

    def remove(self, glossary_id: str) -> bool:
        if self.get(glossary_id) is None:
            return False
        with self._lock:
            self._forget(glossary_id)
            if self.directory is not None:
                (self.directory / f"{glossary_id}.json").unlink(missing_ok=True)
            return True
