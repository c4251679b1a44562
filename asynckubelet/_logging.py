"""The project's logger: loguru's, imported once a message is logged that a sink may take.

Importing loguru is a noticeable part of ``asynckubelet run``'s whole job
(docs/benchmarks.md), and a command that logs nothing at its level (``run`` logs at
WARNING) need not pay it. The modules log through :data:`logger` as they would through
loguru's own (``trace`` ... ``critical``, ``exception``, ``log``, ``bind``, ``opt``); a
message below the level the command line set (:func:`set_threshold`) is dropped before
loguru is imported. A program that embeds the package sets none: every message then goes
to loguru, whose ``enable`` and ``disable`` decide, as for any library. Each record names
the module, function and line of the call, as loguru's own records do.

As loguru asks of a library, the package's messages are off until its user turns them on
(``logger.enable("asynckubelet")``): at the first message the package hands to loguru, it
disables its own name unless the program has already enabled or disabled it (or a name
above it). Doing so then, not at import, keeps ``import asynckubelet`` from importing
loguru or hooking the import system.
"""

from __future__ import annotations

from typing import Any

LEVELS = {
    "TRACE": 5,
    "DEBUG": 10,
    "INFO": 20,
    "SUCCESS": 25,
    "WARNING": 30,
    "ERROR": 40,
    "CRITICAL": 50,
}
_threshold: int | None = None
_PACKAGE = "asynckubelet"
_defaulted = False


def set_threshold(level: str | None) -> None:
    """Messages below ``level`` (a name of :data:`LEVELS`) are dropped before loguru is
    asked; None: every message goes to loguru."""
    global _threshold
    _threshold = None if level is None else LEVELS[level.upper()]


class Logger:
    """loguru's logger, imported at its first message above the threshold."""

    __slots__ = ("_extra", "_options")

    def __init__(
        self, extra: dict[str, Any] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        self._extra = extra or {}
        self._options = options or {}

    def bind(self, **extra: Any) -> Logger:
        return Logger({**self._extra, **extra}, self._options)

    def opt(self, **options: Any) -> Logger:
        return Logger(self._extra, {**self._options, **options})

    def trace(self, message: str, /, *args: Any, **kwargs: Any) -> None:
        self._log("TRACE", message, args, kwargs)

    def debug(self, message: str, /, *args: Any, **kwargs: Any) -> None:
        self._log("DEBUG", message, args, kwargs)

    def info(self, message: str, /, *args: Any, **kwargs: Any) -> None:
        self._log("INFO", message, args, kwargs)

    def success(self, message: str, /, *args: Any, **kwargs: Any) -> None:
        self._log("SUCCESS", message, args, kwargs)

    def warning(self, message: str, /, *args: Any, **kwargs: Any) -> None:
        self._log("WARNING", message, args, kwargs)

    def error(self, message: str, /, *args: Any, **kwargs: Any) -> None:
        self._log("ERROR", message, args, kwargs)

    def critical(self, message: str, /, *args: Any, **kwargs: Any) -> None:
        self._log("CRITICAL", message, args, kwargs)

    def exception(self, message: str, /, *args: Any, **kwargs: Any) -> None:
        """An ERROR with the exception being handled, as loguru's ``exception``."""
        self._log("ERROR", message, args, kwargs, exception=True)

    def log(self, level: str | int, message: str, /, *args: Any, **kwargs: Any) -> None:
        self._log(level, message, args, kwargs)

    def _log(
        self,
        level: str | int,
        message: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        **options: Any,
    ) -> None:
        number = LEVELS.get(level, 0) if isinstance(level, str) else level
        if _threshold is not None and number < _threshold:
            return
        loguru_logger = _loguru()
        found: Any = loguru_logger.bind(**self._extra) if self._extra else loguru_logger
        # The record's module, function and line are the caller's: two frames up, past
        # the level's method and this one.
        chosen = {**self._options, **options}
        chosen["depth"] = chosen.get("depth", 0) + 2
        found.opt(**chosen).log(level, message, *args, **kwargs)


def _loguru() -> Any:
    """loguru's logger, with the package's messages off by default (see the docstring)."""
    global _defaulted
    from loguru import logger as loguru_logger

    if not _defaulted:
        _defaulted = True
        if not _user_decided(loguru_logger):
            loguru_logger.disable(_PACKAGE)
    return loguru_logger


def _user_decided(loguru_logger: Any) -> bool:
    """Whether the program has enabled or disabled the package's name, or a name above it,
    in loguru. loguru has no public question for it; its activation list (pairs of a
    dotted name and its status) is read when present, else nobody decided."""
    core = getattr(loguru_logger, "_core", None)
    activations = getattr(core, "activation_list", None) or ()
    dotted = _PACKAGE + "."
    return any(dotted.startswith(name) for name, _ in activations)


logger = Logger()

__all__ = ["LEVELS", "Logger", "logger", "set_threshold"]
