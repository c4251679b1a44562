"""Turning aiodocker's errors into the project's exception tree, and the retry rule.

aiodocker raises one ``DockerError`` with an HTTP status (900 for "cannot connect");
aiohttp raises its own connection errors when a stream breaks. The runtime wants meaning
(not found, conflict, unavailable, busy), so the adapter maps every call's failure here,
and only the transient meanings are ever retried.
"""

from __future__ import annotations

import asyncio

import aiodocker
import aiohttp

from asynckubelet import errors

_TRANSIENT_500_MARKERS = (
    "is restarting",
    "device or resource busy",
    "connection reset by peer",
    "i/o timeout",
    "try again",
    "context deadline exceeded",
    "resource temporarily unavailable",
)
"""A 500 carrying one of these is the daemon being busy, not the request being wrong."""


def map_error(exc: BaseException, *, what: str = "") -> errors.DockerError:
    """The project error for an aiodocker / aiohttp / OS failure (``what`` names the object)."""
    prefix = f"{what}: " if what else ""
    if isinstance(exc, errors.DockerError):
        return exc
    if isinstance(exc, aiodocker.DockerError):
        status = int(exc.status)
        message = str(exc.message)
        if status == 900:
            return errors.RuntimeUnavailable(f"{prefix}Docker engine unreachable: {message}")
        if status == 404:
            if "image" in message.lower() and "container" not in message.lower():
                return errors.ImageNotFound(f"{prefix}{message}")
            return errors.NotFound(f"{prefix}{message}")
        if status == 409:
            return errors.Conflict(f"{prefix}{message}")
        if status in (502, 503, 504) or (
            status == 500 and any(m in message.lower() for m in _TRANSIENT_500_MARKERS)
        ):
            return errors.ServerBusy(f"{prefix}{message}", status=status)
        return errors.DockerAPIError(f"{prefix}{message}", status=status)
    if isinstance(exc, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | OSError):
        return errors.RuntimeUnavailable(f"{prefix}Docker connection failed: {exc!r}")
    if isinstance(exc, asyncio.TimeoutError):
        return errors.RuntimeUnavailable(f"{prefix}Docker engine did not answer in time")
    return errors.DockerError(f"{prefix}{exc!r}")


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed: the daemon unreachable or busy, nothing else."""
    return isinstance(exc, errors.RuntimeUnavailable | errors.ServerBusy)
