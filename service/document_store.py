"""Translated documents kept for their clients to fetch later (DeepL's document results, LibreTranslate's
downloads): the last ``kept`` by name, in memory, and in ``MT_DOCUMENT_DIR`` too when it is set, so that a request
that reaches another replica sharing the directory (a volume) finds them, as one after a restart does.

A file is written whole under a temporary name and then renamed, so a reader never sees half of one; past
``kept`` files the oldest go. On disk a file is named by the SHA-256 of its name, so that no name (a client's
file name among them) can point anywhere else.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from service.recent import Recent


class DocumentStore:
    def __init__(self, directory: Path | None, kept: int):
        self.directory = directory
        self.kept = kept
        self._memory = Recent[bytes](kept)
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def put(self, name: str, data: bytes) -> None:
        self._memory.put(name, data)
        if self.directory is None:
            return
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, self._path(name))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self._forget_the_oldest()

    def get(self, name: str) -> bytes | None:
        found = self._memory.get(name)
        if found is not None or self.directory is None:
            return found
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None

    def _path(self, name: str) -> Path:
        assert self.directory is not None
        return self.directory / hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()

    def _forget_the_oldest(self) -> None:
        assert self.directory is not None
        files = []
        for path in self.directory.iterdir():
            try:
                if not path.name.startswith(".tmp-"):
                    files.append((path.stat().st_mtime, path))
            except FileNotFoundError:  # another replica removed it meanwhile
                continue
        for _, path in sorted(files)[: max(0, len(files) - self.kept)]:
            path.unlink(missing_ok=True)
