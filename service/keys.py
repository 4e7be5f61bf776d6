"""API keys: who may translate, and how much.

Without any key configured, every client may. ``MT_API_KEY`` is one key without limits (named ``default``);
``MT_API_KEYS=keys.json`` adds named keys, each with optional limits::

    {"team-a": {"key": "s3cret-a", "requests_per_minute": 120, "characters_per_day": 2000000},
     "public": {"key_sha256": "9f86d081884c7d65...", "requests_per_minute": 10, "characters_per_day": 50000}}

A key is given as it is (``key``) or as the SHA-256 of it in hex (``key_sha256``), so the file need not hold the
secret. ``requests_per_minute`` is a token bucket (that many requests at once, refilled evenly over the minute);
``characters_per_day`` counts the characters of the texts translated since 00:00 UTC. Every API checks the same
keys (this one's ``X-API-Key``, LibreTranslate's ``api_key``, DeepL's ``Authorization: DeepL-Auth-Key``); a
refusal says which limit and when to come back. The counts are per server process: with several replicas, each
counts its own.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.metrics import Metrics


class KeyRefused(Exception):
    """A request its key does not allow: ``reason`` is ``missing``, ``wrong``, ``rate`` or ``quota``."""

    def __init__(self, reason: str, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


class KeysError(ValueError):
    """An MT_API_KEYS file the server cannot use; the message names the entry."""


@dataclass
class Client:
    """One key's name, limits and what it used."""

    name: str
    requests_per_minute: int | None = None
    characters_per_day: int | None = None
    tokens: float = 0.0
    refilled: float = 0.0
    day: str = ""
    characters: int = 0
    """characters translated on ``day`` (UTC)"""


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


def _seconds_to_midnight() -> int:
    now = datetime.now(UTC)
    return max(1, 86400 - (now.hour * 3600 + now.minute * 60 + now.second))


class Keys:
    """The server's keys by the SHA-256 of each; empty: no key needed."""

    def __init__(self, clients: dict[str, Client] | None = None, metrics: Metrics | None = None):
        self._by_digest = clients or {}
        self._lock = threading.Lock()
        self.metrics = metrics
        if metrics is not None:
            for client in self._by_digest.values():
                metrics.key_requests.labels(client.name)
                metrics.key_characters.labels(client.name)
                for limit in ("rate", "quota"):
                    metrics.key_refusals.labels(client.name, limit)

    @classmethod
    def configured(cls, single: str | None, path: Path | None, metrics: Metrics | None = None) -> Keys:
        """MT_API_KEY (``single``, named ``default``) and the keys of MT_API_KEYS (``path``)."""
        clients: dict[str, Client] = {}
        if single:
            clients[_digest(single)] = Client("default")
        if path is not None:
            for digest, client in read_keys(path).items():
                if digest in clients:
                    raise KeysError(f"{path}: the key of {client.name!r} is also {clients[digest].name!r}'s")
                clients[digest] = client
        for client in clients.values():
            client.tokens, client.refilled = float(client.requests_per_minute or 0), time.monotonic()
        return cls(clients, metrics)

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    @property
    def names(self) -> list[str]:
        return [client.name for client in self._by_digest.values()]

    def known(self, given: str | None) -> bool:
        """Whether ``given`` is a key of this server (nothing charged)."""
        return bool(given) and _digest(given or "") in self._by_digest

    def admit(self, given: str | None, quota: bool = True) -> Client | None:
        """The client of ``given``, charged one request; None when no key is needed. Raises KeyRefused, also when
        the key's day is spent unless ``quota`` is False (asking what is left)."""
        if not self._by_digest:
            return None
        if not given:
            raise KeyRefused("missing", "missing API key")
        client = self._by_digest.get(_digest(given))
        if client is None:
            raise KeyRefused("wrong", "wrong API key")
        try:
            self._take(client, quota)
        except KeyRefused as err:
            self._refused(client, err)
            raise
        if self.metrics is not None:
            self.metrics.key_requests.labels(client.name).inc()
        return client

    def _take(self, client: Client, quota: bool) -> None:
        """One request off the client's bucket; KeyRefused when it is empty or (``quota``) the day is spent."""
        with self._lock:
            self._quota_left(client, 1 if quota else 0)  # a spent day is refused before a request costs anything
            limit = client.requests_per_minute
            if limit is not None:
                now = time.monotonic()
                client.tokens = min(float(limit), client.tokens + (now - client.refilled) * limit / 60.0)
                client.refilled = now
                if client.tokens < 1.0:
                    wait = math.ceil((1.0 - client.tokens) * 60.0 / limit)
                    raise KeyRefused(
                        "rate", f"the key {client.name!r} may send {limit} requests a minute: retry in {wait} s", wait
                    )
                client.tokens -= 1.0

    def _refused(self, client: Client, err: KeyRefused) -> None:
        if self.metrics is not None:
            self.metrics.key_refusals.labels(client.name, err.reason).inc()

    def charge(self, client: Client | None, characters: int) -> None:
        """Count ``characters`` translated for ``client``; KeyRefused (quota) if that passes its daily limit."""
        if client is None:
            return
        try:
            with self._lock:
                self._quota_left(client, characters)
                client.characters += characters
        except KeyRefused as err:
            self._refused(client, err)
            raise
        if self.metrics is not None:
            self.metrics.key_characters.labels(client.name).inc(characters)

    def used_today(self, client: Client) -> int:
        with self._lock:
            self._quota_left(client, 0)
            return client.characters

    def _quota_left(self, client: Client, characters: int) -> None:
        today = _today()
        if client.day != today:
            client.day, client.characters = today, 0
        limit = client.characters_per_day
        if limit is not None and client.characters + characters > limit:
            raise KeyRefused(
                "quota",
                f"the key {client.name!r} may translate {limit:,} characters a day and has "
                f"{max(0, limit - client.characters):,} left today (UTC): send less, or come back tomorrow",
                _seconds_to_midnight(),
            )


def read_keys(path: Path) -> dict[str, Client]:
    """MT_API_KEYS: ``{name: {"key" or "key_sha256", "requests_per_minute"?, "characters_per_day"?}}``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise KeysError(f"{path}: {err}") from None
    if not isinstance(data, dict) or not data:
        raise KeysError(f'{path}: expected an object of named keys, {{"name": {{"key": ...}}}}')
    clients: dict[str, Client] = {}
    for name, entry in data.items():
        where = f"{path}: {name!r}"
        if not isinstance(entry, dict) or set(entry) - {
            "key",
            "key_sha256",
            "requests_per_minute",
            "characters_per_day",
        }:
            raise KeysError(f"{where}: an object of key or key_sha256, requests_per_minute, characters_per_day")
        if ("key" in entry) == ("key_sha256" in entry):
            raise KeysError(f"{where}: give the key as key or as key_sha256, one of them")
        if "key" in entry:
            if not isinstance(entry["key"], str) or len(entry["key"]) < 8:
                raise KeysError(f"{where}: a key is a string of at least 8 characters")
            digest = _digest(entry["key"])
        else:
            digest = str(entry["key_sha256"]).lower()
            if not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise KeysError(f"{where}: key_sha256 is 64 hexadecimal digits (sha256sum of the key)")
        for limit in ("requests_per_minute", "characters_per_day"):
            value = entry.get(limit)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise KeysError(f"{where}: {limit} is a whole number of at least 1")
        if digest in clients:
            raise KeysError(f"{where}: the same key as {clients[digest].name!r}")
        clients[digest] = Client(str(name), entry.get("requests_per_minute"), entry.get("characters_per_day"))
    return clients
