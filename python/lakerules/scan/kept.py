"""JVM delete sets kept across queries in the driver's process: built once for what they are
built from (delete files and data files never change), the least recently used dropped and
released first once the sets kept pass a bound of their size."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable


class Kept:
    """Sets by key, at most ``limit`` of ``size(set)`` in all (the newest one is kept whatever
    its size); a built value may be None (nothing to keep but the answer)."""

    def __init__(self, size: Callable[[object], int], limit: int):
        self._size, self._limit = size, limit
        self._lock = threading.Lock()
        self._sets: OrderedDict = OrderedDict()

    def get(self, key, build: Callable[[], object]):
        """The set kept for ``key``, else ``build()``'s, then kept (built outside the lock: a
        set can take a Spark job)."""
        with self._lock:
            if key in self._sets:
                self._sets.move_to_end(key)
                return self._sets[key]
        value = build()
        with self._lock:
            self._sets[key] = value
            while len(self._sets) > 1 and sum(self._size(s) for s in self._sets.values() if s is not None) > self._limit:
                _, evicted = self._sets.popitem(last=False)
                if evicted is not None:
                    evicted.release()
        return value

    def clear(self) -> None:
        """Forgets every set (benchmarks measuring a first read), without releasing them."""
        with self._lock:
            self._sets.clear()
