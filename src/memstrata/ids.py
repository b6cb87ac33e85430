"""Sortable identifiers: 26-character ULIDs, strictly increasing within a process."""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: no I, L, O, U


class IdGenerator:
    """Makes ULIDs (48-bit milliseconds + 80 random bits) that sort by creation order.

    Within one millisecond the random part is incremented instead of redrawn, so ids
    made by one process never go backwards (the ULID spec's monotonic mode).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_millis = -1
        self._last_random = 0

    def new(self) -> str:
        """Return the next id."""
        with self._lock:
            millis = max(time.time_ns() // 1_000_000, self._last_millis)
            if millis == self._last_millis and self._last_random < (1 << 80) - 1:
                self._last_random += 1
            elif millis == self._last_millis:  # random part exhausted: borrow the next millisecond
                millis += 1
                self._last_random = 0
            else:
                self._last_random = int.from_bytes(os.urandom(10), "big")
            self._last_millis = millis
            value = (millis << 80) | self._last_random
        return "".join(_ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))
