"""Times as kubectl reads and shows them: Go's duration syntax (``--since=5m``) and now."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go's duration syntax as kubectl takes it (``5s``, ``2m30s``, ``1h``) in seconds."""
    pos = 0
    total = 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text!r}: use a number and a unit, e.g. 30s, 5m, 1h")
    return total


def now_utc() -> datetime:
    return datetime.now(UTC)


__all__ = ["now_utc", "parse_duration"]
