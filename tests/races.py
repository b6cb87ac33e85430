"""Races staged in one thread: another worker's step lands right after a read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def after_first_read(
    monkeypatch: pytest.MonkeyPatch, owner: object, method: str, step: Callable[[], None]
) -> list[bool]:
    """Make ``owner.method``'s first call run ``step`` right after it read, as another worker would.

    The returned list is non-empty once the step ran, so a test can check the race happened.
    """
    read = getattr(owner, method)
    raced: list[bool] = []

    def stale(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        if not raced:
            raced.append(True)
            monkeypatch.setattr(owner, method, read)
            step()
        return found

    monkeypatch.setattr(owner, method, stale)
    return raced
