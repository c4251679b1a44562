"""The node's heartbeat: a ``coordination.k8s.io/v1`` Lease in ``kube-node-lease``.

The node lifecycle controller takes a renewed Lease as proof of life, so the kubelet
renews its Lease every 10 s (a quarter of its 40 s duration) and sends the far larger
Node status only on change. This is the kubelet's lease controller
(``pkg/kubelet/nodelease``, ``component-helpers/apimachinery/lease``): the Lease is named
after the node, held by it, owned by the Node object (so it goes with it), created when
missing, updated from the copy the last write returned (a conflict fetches a fresh one
and tries again), and a failed round is retried with a back-off from 200 ms up to 7 s
before the regular interval resumes. Clock and sleep are injected for tests.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio
import anyio.abc
from lightkube.models.coordination_v1 import Lease, LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.cluster.api import ClusterAPI
from asynckubelet.cluster.retry import Reconnect

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION = 40
"""Seconds (``nodeLeaseDurationSeconds``)."""
RENEW_FRACTION = 0.25
"""The kubelet renews after this fraction of the duration: every 10 s."""
MAX_UPDATE_TRIES = 5
RETRY_INITIAL = 0.2
RETRY_MAX = 7.0


def new_lease(
    node_name: str, *, node_uid: str | None, now: datetime, duration: int = LEASE_DURATION
) -> Lease:
    owners = (
        [OwnerReference(apiVersion="v1", kind="Node", name=node_name, uid=node_uid)]
        if node_uid
        else None
    )
    return Lease(
        apiVersion="coordination.k8s.io/v1",
        kind="Lease",
        metadata=ObjectMeta(name=node_name, namespace=LEASE_NAMESPACE, ownerReferences=owners),
        spec=LeaseSpec(holderIdentity=node_name, leaseDurationSeconds=duration, renewTime=now),
    )


def renewed(
    lease: Lease,
    *,
    node_name: str,
    node_uid: str | None,
    now: datetime,
    duration: int = LEASE_DURATION,
) -> Lease:
    """The lease with this node as holder and ``now`` as renew time (a copy); an owner
    reference to the Node is added when it has none."""
    out = copy.deepcopy(lease)
    spec = out.spec or LeaseSpec()
    spec.holderIdentity = node_name
    spec.leaseDurationSeconds = duration
    spec.renewTime = now
    out.spec = spec
    meta = out.metadata or ObjectMeta(name=node_name, namespace=LEASE_NAMESPACE)
    if node_uid and not meta.ownerReferences:
        meta.ownerReferences = [
            OwnerReference(apiVersion="v1", kind="Node", name=node_name, uid=node_uid)
        ]
    out.metadata = meta
    return out


class LeaseKeeper:
    """Keeps the node's Lease renewed."""

    def __init__(
        self,
        api: ClusterAPI,
        *,
        node_name: str,
        node_uid: Callable[[], str | None],
        duration: int = LEASE_DURATION,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.node_uid = node_uid
        self.duration = duration
        self.renew_interval = duration * RENEW_FRACTION
        self.clock = clock
        self.sleep = sleep
        self.latest: Lease | None = None
        self.renewals = 0

    async def _ensure(self) -> tuple[Lease, bool]:
        """The Lease as it is, or a new one: ``(lease, created)``."""
        lease = await self.api.get_lease(LEASE_NAMESPACE, self.node_name)
        if lease is not None:
            return lease, False
        fresh = new_lease(
            self.node_name, node_uid=self.node_uid(), now=self.clock(), duration=self.duration
        )
        try:
            return await self.api.create_lease(fresh), True
        except errors.ClusterAPIError as e:
            if not e.conflict:
                raise
        fetched = await self.api.get_lease(LEASE_NAMESPACE, self.node_name)
        if fetched is None:
            raise errors.ClusterError(f"lease {LEASE_NAMESPACE}/{self.node_name} vanished")
        return fetched, False

    async def renew_once(self) -> Lease:
        """Create or renew the Lease once (a few tries on conflict); raises on failure."""
        if self.latest is None:
            self.latest, created = await self._ensure()
            if created:
                self.renewals += 1
                return self.latest
        for attempt in range(MAX_UPDATE_TRIES):
            lease = renewed(
                self.latest,
                node_name=self.node_name,
                node_uid=self.node_uid(),
                now=self.clock(),
                duration=self.duration,
            )
            try:
                self.latest = await self.api.replace_lease(lease)
            except errors.ClusterAPIError as e:
                if e.not_found:
                    self.latest = None
                    return await self.renew_once()
                if not e.conflict or attempt == MAX_UPDATE_TRIES - 1:
                    raise
                self.latest, _ = await self._ensure()
                continue
            self.renewals += 1
            return self.latest
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Renew forever: every ``renew_interval`` s, sooner after a failure."""
        backoff = Reconnect(initial=RETRY_INITIAL, maximum=RETRY_MAX, sleep=self.sleep)
        started = False
        while True:
            try:
                await self.renew_once()
            except errors.ClusterError as e:
                if backoff.failures == 0:
                    logger.warning("renewing the node's lease failed; retrying: {}", e)
                if not started:
                    started = True
                    task_status.started()
                await backoff.failed()
                continue
            if backoff.failures:
                logger.info("the node's lease is renewed again")
            backoff.succeeded()
            if not started:
                started = True
                task_status.started()
            await self.sleep(self.renew_interval)


__all__ = ["LEASE_DURATION", "LEASE_NAMESPACE", "LeaseKeeper", "new_lease", "renewed"]
