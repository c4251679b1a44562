"""Log sinks that never print a secret.

loguru's defaults are made for debugging a program on one's own machine: ``diagnose=True``
prints the value of every variable in each frame of a traceback, and ``backtrace=True``
extends it into the caller's frames. In an agent that holds Secrets, pull secret
passwords and service-account tokens in local variables, one logged exception would copy
them into a log file. Every sink of this project is therefore added through
:func:`add_sink`, which turns both off; tracebacks keep their file, line and source text.
"""

from __future__ import annotations

from typing import Any

from loguru import logger

SAFE_OPTIONS: dict[str, Any] = {"diagnose": False, "backtrace": False}


def add_sink(sink: Any, *, level: str | int = "INFO", **options: Any) -> int:
    """``logger.add(sink, level=level, **options)`` with variable values and extended
    backtraces off (whatever ``options`` say); returns the sink's id."""
    return logger.add(sink, level=level, **{**options, **SAFE_OPTIONS})


__all__ = ["SAFE_OPTIONS", "add_sink"]
