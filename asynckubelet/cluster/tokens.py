"""Projected service-account tokens from the API server's ``TokenRequest``.

In a cluster, the token in a ``serviceAccountToken`` projection must be one the API server
accepts: the kubelet's token manager asks for it (``serviceaccounts/<sa>/token``) bound to
the pod, so it dies with the pod, and the Node authorizer lets a node ask only for pods
bound to it. This is that manager: a token is cached per request and replaced past 80 %
of its lifetime (or 24 h) less a jitter, the rule of
:func:`asynckubelet.node.tokens.requires_refresh`; the node's volume manager, which calls
it from a worker thread, rewrites the volume when the token changes. A request that fails
is a ``FailedMount`` of the volume, retried at the pod's next sync.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import anyio.from_thread

from asynckubelet import errors
from asynckubelet.cluster.api import ClusterAPI
from asynckubelet.node.tokens import MAX_JITTER_SECONDS, Token, TokenRequest, requires_refresh


class ClusterTokens:
    """A :class:`~asynckubelet.node.tokens.TokenSource` backed by ``TokenRequest``."""

    def __init__(
        self,
        api: ClusterAPI,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.clock = clock
        self._cache: dict[TokenRequest, Token] = {}
        self._lock = threading.Lock()

    def token(self, request: TokenRequest) -> Token:
        """The cached token, or a new one from the API server (called in a worker thread
        that anyio started, so the request runs on the event loop)."""
        now = self.clock()
        with self._lock:
            cached = self._cache.get(request)
        jitter = random.uniform(0, MAX_JITTER_SECONDS)  # noqa: S311  (refresh-time jitter, not a secret)
        if cached is not None and not requires_refresh(cached, now=now, jitter=jitter):
            return cached
        try:
            token = anyio.from_thread.run(self._request, request)
        except errors.ClusterError as e:
            raise errors.VolumeError(
                f"failed to fetch token: {e}", volume="serviceAccountToken"
            ) from e
        with self._lock:
            self._cache[request] = token
        return token

    async def _request(self, request: TokenRequest) -> Token:
        issued = self.clock()
        bound = await self.api.request_token(
            namespace=request.namespace,
            service_account=request.service_account,
            audiences=request.audiences,
            expiration_seconds=request.expiration_seconds,
            pod_name=request.pod_name,
            pod_uid=request.pod_uid,
        )
        return Token(value=bound.value, issued_at=issued, expires_at=bound.expires_at)

    def forget(self, *, pod_uid: str) -> None:
        with self._lock:
            for request in [r for r in self._cache if r.pod_uid == pod_uid]:
                del self._cache[request]


__all__ = ["ClusterTokens"]
