"""Turning aiodocker's errors into the project's exception tree, and the retry rule.

aiodocker raises one ``DockerError`` with an HTTP status (900 for "cannot connect");
aiohttp raises its own connection errors when a stream breaks. The runtime wants meaning
(not found, conflict, unavailable, busy), so the adapter maps every call's failure here,
and only the transient meanings are ever retried.

A TLS handshake that fails (the engine's certificate not signed by our CA or not naming its
address, our client certificate refused) is reported as the engine being unavailable, with
the address and the problem in words, and is not retried: another attempt meets the same
certificates.
"""

from __future__ import annotations

import asyncio
import ssl

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


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        todo += [current.__cause__, current.__context__]
        todo += [getattr(current, name, None) for name in ("certificate_error", "os_error")]
        todo += [a for a in getattr(current, "args", ()) if isinstance(a, BaseException)]
    return seen


def tls_problem(exc: BaseException) -> str | None:
    """What went wrong in a TLS handshake, in words; None when ``exc`` is no TLS failure."""
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, ssl.SSLCertVerificationError) and not isinstance(e, aiohttp.ClientError):
            detail = e.verify_message or e.reason or str(e)
            return (
                f"the engine's certificate is not trusted ({detail}): it must be signed by "
                "the CA in DOCKER_CERT_PATH/ca.pem and name the address the engine is "
                "reached at"
            )
    for e in chain:
        if isinstance(e, ssl.SSLError) and not isinstance(e, aiohttp.ClientError):
            reason = str(e.reason or e).lower()
            if "alert" in reason and ("certificate" in reason or "unknown_ca" in reason):
                return (
                    f"the engine refused this client's certificate ({reason}): "
                    "DOCKER_CERT_PATH/cert.pem must be signed by the CA the engine trusts "
                    "(dockerd --tlscacert)"
                )
            if "wrong_version_number" in reason or "record_layer_failure" in reason:
                return f"the engine does not speak TLS at this address ({reason})"
            return f"the TLS handshake failed ({reason})"
    return None


def map_error(
    exc: BaseException, *, what: str = "", address: str | None = None
) -> errors.DockerError:
    """The project error for an aiodocker / aiohttp / OS failure (``what`` names the object,
    ``address`` the engine)."""
    prefix = f"{what}: " if what else ""
    if isinstance(exc, errors.DockerError):
        return exc
    problem = tls_problem(exc)
    if problem is not None:
        return errors.RuntimeUnavailable(
            f"{prefix}cannot talk to the Docker engine at {address or 'DOCKER_HOST'} "
            f"over TLS: {problem}"
        )
    if isinstance(exc, aiodocker.DockerError):
        status = int(exc.status)
        message = str(exc.message)
        if status == 400 and "http request to an https server" in message.lower():
            return errors.RuntimeUnavailable(
                f"{prefix}the Docker engine at {address or 'DOCKER_HOST'} speaks TLS only: "
                "set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH to the folder with ca.pem, "
                "cert.pem and key.pem"
            )
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
    """Whether another attempt may succeed: the daemon unreachable or busy, nothing else
    (a refused certificate or plain HTTP to a TLS port stays so)."""
    if not isinstance(exc, errors.RuntimeUnavailable | errors.ServerBusy):
        return False
    cause = exc.__cause__
    if cause is None:
        return True
    if tls_problem(cause) is not None:
        return False
    return not (
        isinstance(cause, aiodocker.DockerError)
        and int(cause.status) == 400
        and "http request to an https server" in str(cause.message).lower()
    )
