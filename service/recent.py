"""The last few values put, by key: what an API keeps for its clients to fetch later (translated files, documents)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Recent(Generic[T]):
    """At most ``size`` values by key; putting one more forgets the oldest."""

    def __init__(self, size: int):
        self.size = size
        self._values: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: Hashable, value: T) -> None:
        with self._lock:
            self._values[key] = value
            while len(self._values) > self.size:
                self._values.popitem(last=False)

    def get(self, key: Hashable) -> T | None:
        with self._lock:
            return self._values.get(key)
