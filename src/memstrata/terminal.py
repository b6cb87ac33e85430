"""Stored text made safe to print on a terminal: what a user stored must not drive it."""

from __future__ import annotations

import re

# C0 and C1 control characters but tab and newline: a stored message must not drive the terminal
# (colours, window titles, the clipboard through OSC 52).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with control characters written out as ``\\xNN``, so printing it cannot drive a terminal."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)
