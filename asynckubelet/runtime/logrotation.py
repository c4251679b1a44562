"""Container log rotation as the kubelet configures it (``containerLogMaxSize``,
``containerLogMaxFiles``), carried out by the engine.

A container's output goes to a file of the engine's, and a pod that prints without end
would fill the engine's disk. The kubelet rotates CRI log files itself; here the engine
writes the files, and its own log drivers rotate them: each container is created with
``HostConfig.LogConfig`` asking the engine's default driver for the kubelet's limits
when that driver is one that rotates its files (``json-file``, the engine's default, and
``local``), and with the engine's defaults otherwise (a driver that sends the logs
elsewhere keeps no file to rotate here, and the node says once that it does not rotate
them). The daemon's own options for that driver still apply where the node sets none.

The limits are not part of a container's spec hash: a node started with other limits
leaves the containers already running as they are, and their next instances get the new
limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asynckubelet.manifests.quantity import QuantityError, parse_quantity

DEFAULT_MAX_SIZE = "10Mi"
"""The kubelet's ``containerLogMaxSize`` default."""
DEFAULT_MAX_FILES = 5
"""The kubelet's ``containerLogMaxFiles`` default."""
ROTATING_DRIVERS = ("json-file", "local")
"""The engine's log drivers that keep a container's output in files they rotate by
``max-size`` and ``max-file``."""


def parse_max_size(text: str, *, name: str = "--container-log-max-size") -> int:
    """The bytes of a Kubernetes quantity (``10Mi``, ``512Ki``, ``1G``), as the kubelet
    reads ``containerLogMaxSize``; negative: no rotation. A value that is no quantity,
    no whole number of bytes, or zero (which no engine driver takes) is refused with a
    :class:`ValueError` naming ``name``."""
    try:
        quantity = parse_quantity(text)
    except QuantityError as e:
        raise ValueError(f"{name} {text!r}: not a quantity: {e}") from None
    if not quantity.is_integer():
        raise ValueError(f"{name} {text!r}: must be a whole number of bytes")
    size = int(quantity.value)
    if size == 0:
        raise ValueError(f"{name} {text!r}: must be more than 0 bytes (negative: no rotation)")
    if size >= 2**63:
        raise ValueError(f"{name} {text!r}: must be less than 8Ei")
    return size


def check_max_files(files: int, *, name: str = "--container-log-max-files") -> int:
    """``files`` when it is at least 2, as the kubelet validates ``containerLogMaxFiles``
    (the file being written and one rotated); a :class:`ValueError` naming ``name``
    otherwise."""
    if isinstance(files, bool) or not isinstance(files, int) or files < 2:
        raise ValueError(f"{name} {files!r}: must be greater than 1")
    return files


@dataclass(frozen=True)
class LogRotation:
    """The limits: ``max_size`` bytes per file (negative: no rotation), ``max_files``
    files kept per container, the one being written included."""

    max_size: int
    max_files: int

    @classmethod
    def parse(cls, max_size: str, max_files: int) -> LogRotation:
        return cls(max_size=parse_max_size(max_size), max_files=check_max_files(max_files))

    def log_config(self, driver: str) -> dict[str, Any] | None:
        """``HostConfig.LogConfig`` for a container on an engine whose default log driver
        is ``driver``; None to leave the engine's own (no rotation asked, or a driver that
        keeps no files to rotate)."""
        if self.max_size < 0 or driver not in ROTATING_DRIVERS:
            return None
        return {
            "Type": driver,
            "Config": {"max-size": str(self.max_size), "max-file": str(self.max_files)},
        }


__all__ = [
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_SIZE",
    "ROTATING_DRIVERS",
    "LogRotation",
    "check_max_files",
    "parse_max_size",
]
