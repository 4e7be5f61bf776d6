"""service/document_store.py: the last ``kept`` documents, in memory and in a directory replicas share."""

from __future__ import annotations

import os
from pathlib import Path

from service.document_store import DocumentStore


def test_a_store_keeps_the_last_documents_and_another_on_the_same_directory_reads_them(tmp_path: Path) -> None:
    one, other = DocumentStore(tmp_path / "d", kept=3), DocumentStore(tmp_path / "d", kept=3)
    for n in range(5):
        one.put(f"../doc {n}.txt", f"body {n}".encode())
        path = next(p for p in (tmp_path / "d").iterdir() if p.read_bytes() == f"body {n}".encode())
        os.utime(path, (n, n))  # written in order, whatever the file system's clock resolution
    assert sorted(p.read_bytes() for p in (tmp_path / "d").iterdir()) == [b"body 2", b"body 3", b"body 4"]
    assert other.get("../doc 4.txt") == b"body 4" and other.get("../doc 0.txt") is None
    assert one.get("../doc 0.txt") is None  # memory keeps as many as the directory
    assert not (tmp_path / "doc 4.txt").exists() and list(tmp_path.iterdir()) == [tmp_path / "d"]


def test_without_a_directory_documents_live_in_memory(tmp_path: Path) -> None:
    store = DocumentStore(None, kept=2)
    store.put("a", b"1")
    store.put("b", b"2")
    store.put("c", b"3")
    assert (store.get("a"), store.get("c")) == (None, b"3")
