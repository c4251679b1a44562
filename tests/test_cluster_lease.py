"""The node's Lease: created, renewed every 10 s, retried with back-off (fake clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest
from fake_cluster import FakeCluster

from asynckubelet import errors
from asynckubelet.cluster.lease import LEASE_NAMESPACE, LeaseKeeper

pytestmark = pytest.mark.anyio
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0
        self.slept: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)
        await anyio.lowlevel.checkpoint()


def keeper(api: FakeCluster, clock: Clock) -> LeaseKeeper:
    return LeaseKeeper(
        api, node_name="n1", node_uid=lambda: "node-uid", clock=clock, sleep=clock.sleep
    )


async def test_a_missing_lease_is_created_held_by_the_node_and_owned_by_its_node() -> None:
    api, clock = FakeCluster(), Clock()
    lease = await keeper(api, clock).renew_once()
    assert lease.metadata is not None
    assert lease.spec is not None
    assert (lease.metadata.namespace, lease.metadata.name) == (LEASE_NAMESPACE, "n1")
    assert lease.spec.holderIdentity == "n1"
    assert lease.spec.leaseDurationSeconds == 40
    assert lease.spec.renewTime == T0
    owner = (lease.metadata.ownerReferences or [])[0]
    assert (owner.kind, owner.name, owner.uid) == ("Node", "n1", "node-uid")


async def test_an_existing_lease_is_renewed_with_the_current_time() -> None:
    api, clock = FakeCluster(), Clock()
    first = keeper(api, clock)
    await first.renew_once()
    clock.now += timedelta(seconds=10)
    second = keeper(api, clock)
    lease = await second.renew_once()
    assert lease.spec is not None
    assert lease.spec.renewTime == T0 + timedelta(seconds=10)
    assert [c for c, _ in api.calls].count("create_lease") == 1


async def test_a_conflict_fetches_the_lease_again_and_renews_it() -> None:
    api, clock = FakeCluster(), Clock()
    node = keeper(api, clock)
    await node.renew_once()
    stored = api.leases["n1"]
    assert stored.metadata is not None
    stored.metadata.resourceVersion = "someone-else"
    clock.now += timedelta(seconds=10)
    lease = await node.renew_once()
    assert lease.spec is not None
    assert lease.spec.renewTime == clock.now
    assert [c for c, _ in api.calls][-3:] == ["replace_lease", "get_lease", "replace_lease"]


async def test_the_lease_is_renewed_every_ten_seconds() -> None:
    api, clock = FakeCluster(), Clock()
    node = keeper(api, clock)
    with anyio.move_on_after(1):
        async with anyio.create_task_group() as tg:
            tg.start_soon(node.run)
            while node.renewals < 4:
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
    assert clock.slept[:3] == [10.0, 10.0, 10.0]
    assert node.renewals >= 4


async def test_failed_renewals_are_retried_sooner_with_growing_delays_up_to_seven_seconds() -> None:
    api, clock = FakeCluster(), Clock()
    unavailable = errors.ClusterUnavailable("connection refused")
    api.fail_next["get_lease"] = [unavailable] * 8
    node = keeper(api, clock)
    with anyio.move_on_after(1):
        async with anyio.create_task_group() as tg:
            tg.start_soon(node.run)
            while node.renewals < 1:
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
    retries = clock.slept[:8]
    assert len(retries) == 8
    assert retries[0] < 1.0
    assert all(delay <= 7.0 + 0.2 for delay in retries)
    assert retries[-1] > retries[0]
    assert node.renewals == 1
