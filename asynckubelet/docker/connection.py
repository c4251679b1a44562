"""The connection under :class:`~asynckubelet.docker.client.DockerClient`: one engine,
its error mapping and its retries.

Apart from the calls themselves, because every call goes through the same three steps:
connect once (``DOCKER_HOST``, TLS, the per-request timeout), map whatever aiodocker,
aiohttp or the socket raised into the project's exception tree (explaining a TLS failure
behind a dropped connection), and retry only what is transient, with bounded exponential
backoff and jitter. Streams release their pooled connection however they end.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

import aiodocker
import aiohttp
import anyio

from asynckubelet import _trace, errors
from asynckubelet._logging import logger
from asynckubelet.docker.engine import Endpoint, EngineTLS, engine_endpoint, tls_handshake_error
from asynckubelet.docker.errors import is_transient, map_error, tls_problem

if TYPE_CHECKING:
    from tenacity import RetryCallState

T = TypeVar("T")

_API_VERSION = re.compile(r"^\d+\.\d+$")


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    logger.warning("docker call failed ({}), attempt {}; retrying", exc, state.attempt_number)


async def _ping(docker: aiodocker.Docker) -> None:
    """``GET /_ping``, as the docker CLI asks first: the engine's cheapest answer, whose
    ``Api-Version`` header settles the API version for every later call (aiodocker would
    otherwise ask ``GET /version``, which makes the engine ask containerd, before the
    first versioned call)."""
    async with docker._query("_ping", versioned_api=False) as response:
        version = response.headers.get("Api-Version", "")
    if docker.api_version == "auto" and _API_VERSION.match(version):
        docker.api_version = f"v{version}"


class EngineConnection:
    """One Docker engine, connected on first use; :meth:`_call` runs an API call on it."""

    def __init__(
        self,
        *,
        url: str | None = None,
        tls: EngineTLS | None = None,
        retry_attempts: int = 5,
        retry_max_delay: float = 10.0,
        retry_initial_wait: float = 0.1,
        request_timeout: float | None = 120.0,
    ) -> None:
        self._url = url
        self._request_timeout = request_timeout
        self._tls = tls
        self._address: str | None = None
        self._endpoint: Endpoint | None = None
        self._docker: aiodocker.Docker | None = None
        self._retry_attempts = retry_attempts
        self._retry_max_delay = retry_max_delay
        self._retry_initial_wait = retry_initial_wait

    async def __aenter__(self) -> Self:
        self._connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _connect(self) -> aiodocker.Docker:
        if self._docker is None:
            endpoint = engine_endpoint(self._url, tls=self._tls)
            self._address = endpoint.address
            self._endpoint = endpoint
            try:
                self._docker = aiodocker.Docker(
                    url=endpoint.url,
                    ssl_context=endpoint.tls,
                    timeout=aiohttp.ClientTimeout(
                        total=self._request_timeout, sock_connect=self._request_timeout
                    ),
                )
            except (ValueError, OSError, aiodocker.DockerError) as e:
                raise errors.RuntimeUnavailable(f"no Docker engine to connect to: {e}") from e
        return self._docker

    @property
    def url(self) -> str:
        """The engine's address as given (``unix://...``, ``tcp://host:port``)."""
        docker = self._connect()
        return self._address or str(docker.docker_host)

    async def close(self) -> None:
        if self._docker is not None:
            docker, self._docker = self._docker, None
            with anyio.CancelScope(shield=True):
                await docker.close()

    async def _explain_tls_failure(self, what: str) -> None:
        """Raise the TLS problem behind a dropped connection to a TLS engine, if there is one."""
        endpoint = self._endpoint
        if endpoint is None or endpoint.tls is None:
            return
        failure = await anyio.to_thread.run_sync(tls_handshake_error, endpoint)
        if failure is not None:
            raise map_error(failure, what=what, address=self._address) from failure

    async def _call(
        self, what: str, fn: Callable[[aiodocker.Docker], Awaitable[T]], *, retry: bool = True
    ) -> T:
        """Run one API call with error mapping and, when ``retry``, transient retries.

        The retrying (tenacity's) is set up only once the first attempt has failed: its
        objects refer to one another, so each one made was garbage that only the cyclic
        collector frees, and a node that has just started many pods held them all until a
        full collection (docs/benchmarks.md)."""

        async def once() -> T:
            began = _trace.clock()
            try:
                return await fn(self._connect())
            except errors.AsyncKubeletError:
                raise
            except (aiodocker.DockerError, aiohttp.ClientError, OSError, TimeoutError) as e:
                mapped = map_error(e, what=what, address=self._address)
                if isinstance(mapped, errors.RuntimeUnavailable) and tls_problem(e) is None:
                    await self._explain_tls_failure(what)
                raise mapped from e
            finally:
                _trace.engine(what, began)

        if not retry:
            return await once()
        try:
            return await once()
        except errors.AsyncKubeletError as e:
            if not is_transient(e):
                raise
            first: errors.AsyncKubeletError | None = e

        async def again() -> T:
            # tenacity's first attempt is the one that just failed: the waits, the logged
            # retries and the attempts are as if tenacity had made it (the delay's bound
            # counts from its failure).
            nonlocal first
            if first is not None:
                failure, first = first, None
                raise failure
            return await once()

        from tenacity import (
            AsyncRetrying,
            retry_if_exception,
            stop_after_attempt,
            stop_after_delay,
            wait_exponential_jitter,
        )

        retrying = AsyncRetrying(
            retry=retry_if_exception(is_transient),
            stop=stop_after_attempt(self._retry_attempts) | stop_after_delay(self._retry_max_delay),
            wait=wait_exponential_jitter(
                multiplier=self._retry_initial_wait, max=2.0, jitter=self._retry_initial_wait
            ),
            before_sleep=_log_retry,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await again()
        raise AssertionError("unreachable")  # pragma: no cover


@asynccontextmanager
async def _streaming(
    docker: aiodocker.Docker, path: str, method: str = "GET", **kwargs: Any
) -> AsyncIterator[aiohttp.ClientResponse]:
    """aiodocker's ``_query``, with the response always released: a stream abandoned part-way
    (a cancelled log follower or event watcher) would otherwise keep its pooled connection
    for good, and once the pool is spent every call waits forever."""
    async with docker._query(path, method, **kwargs) as response:
        try:
            yield response
        finally:
            response.release()
