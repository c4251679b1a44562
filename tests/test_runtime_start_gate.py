"""The runtime asks the engine to create and start at most so many containers at once,
a pod's own containers before new pods' sandboxes (the gate alone, then the runtime on
FakeDocker)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from daemon_helpers import IMAGES, cluster_serve
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import load_manifests_text
from asynckubelet.network import LoopbackPlugin, PodNetwork, PodNetworkRequest
from asynckubelet.runtime import gate
from asynckubelet.runtime.gate import StartGate
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers:
  - {name: a, image: busybox:1.35}
  - {name: b, image: busybox:1.35}
"""


async def _hold(
    g: StartGate, order: list[str], name: str, release: anyio.Event, sandbox: bool
) -> None:
    async with g.slot(sandbox=sandbox):
        order.append(name)
        await release.wait()


async def test_no_more_than_the_limit_hold_a_slot_at_once() -> None:
    g = StartGate(3)
    holding = 0
    most = 0

    async def start() -> None:
        nonlocal holding, most
        async with g.slot():
            holding += 1
            most = max(most, holding)
            await anyio.sleep(0.01)
            holding -= 1

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(start)
    assert most == 3
    assert (g.busy, g.waiting) == (0, 0)


async def test_a_pods_containers_go_before_the_sandboxes_of_pods_not_begun() -> None:
    g = StartGate(1)
    order: list[str] = []
    release = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_hold, g, order, "first", release, True)
            await anyio.wait_all_tasks_blocked()
            for name in ("sandbox 2", "sandbox 3"):
                tg.start_soon(_hold, g, order, name, release, True)
                await anyio.wait_all_tasks_blocked()
            tg.start_soon(_hold, g, order, "container of 1", release, False)
            await anyio.wait_all_tasks_blocked()
            assert order == ["first"]
            release.set()
    assert order == ["first", "container of 1", "sandbox 2", "sandbox 3"]


async def _sandbox_of(
    g: StartGate, order: list[str], pod: str, release: anyio.Event | None = None
) -> None:
    """A pod's sandbox made (its slot given back, claimed for the pod) when ``release``
    is set, at once without one."""
    async with g.slot(sandbox=True, pod=pod):
        order.append(f"sandbox {pod}")
        if release is not None:
            await release.wait()


async def _container_of(
    g: StartGate, order: list[str], pod: str, release: anyio.Event | None = None
) -> None:
    async with g.slot(pod=pod):
        order.append(f"container of {pod}")
        if release is not None:
            await release.wait()


async def test_a_pod_whose_sandbox_is_made_keeps_its_slot_from_new_sandboxes() -> None:
    g = StartGate(1)
    order: list[str] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await _sandbox_of(g, order, "1")
            # The pod sets up its network: none of its containers waits yet.
            tg.start_soon(_sandbox_of, g, order, "2")
            await anyio.wait_all_tasks_blocked()
            assert order == ["sandbox 1"]
            assert (g.busy, g.waiting, g.claims) == (0, 1, {"1"})
            tg.start_soon(_container_of, g, order, "1")
            await anyio.wait_all_tasks_blocked()
    assert order == ["sandbox 1", "container of 1", "sandbox 2"]
    assert (g.busy, g.waiting, g.claims) == (0, 0, {"2"})


async def test_the_containers_of_other_pods_may_use_a_claimed_slot() -> None:
    g = StartGate(2)
    order: list[str] = []
    release = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_container_of, g, order, "1", release)
            await anyio.wait_all_tasks_blocked()
            await _sandbox_of(g, order, "2")
            tg.start_soon(_sandbox_of, g, order, "3")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(_container_of, g, order, "1", release)
            await anyio.wait_all_tasks_blocked()
            # Pod 1's second container took the slot pod 2 claimed; pod 3's sandbox waits.
            assert order == ["container of 1", "sandbox 2", "container of 1"]
            assert (g.busy, g.waiting) == (2, 1)
            tg.start_soon(_container_of, g, order, "2", release)
            await anyio.wait_all_tasks_blocked()
            assert g.claims == set()
            release.set()
    assert order[3:] == ["container of 2", "sandbox 3"]


async def test_a_pod_that_gives_up_its_claim_lets_the_next_sandbox_in() -> None:
    g = StartGate(1)
    order: list[str] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await _sandbox_of(g, order, "1")
            tg.start_soon(_sandbox_of, g, order, "2")
            await anyio.wait_all_tasks_blocked()
            g.unclaim("1")
            g.unclaim("1")
            await anyio.wait_all_tasks_blocked()
    assert order == ["sandbox 1", "sandbox 2"]
    assert (g.busy, g.waiting, g.claims) == (0, 0, {"2"})


async def test_a_sandbox_that_fails_leaves_no_claim() -> None:
    g = StartGate(1)
    with pytest.raises(RuntimeError, match="no sandbox"):
        async with g.slot(sandbox=True, pod="1"):
            raise RuntimeError("no sandbox")
    assert (g.busy, g.claims) == (0, set())


async def test_with_no_limit_nothing_is_claimed() -> None:
    g = StartGate(0)
    await _sandbox_of(g, [], "1")
    assert g.claims == set()


async def test_a_start_cancelled_while_it_waits_takes_no_slot() -> None:
    g = StartGate(1)
    order: list[str] = []
    release = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_hold, g, order, "first", release, False)
            await anyio.wait_all_tasks_blocked()
            waiting = anyio.CancelScope()
            tg.start_soon(_hold_in, waiting, g, order, release)
            await anyio.wait_all_tasks_blocked()
            assert g.waiting == 1
            waiting.cancel()
            await anyio.wait_all_tasks_blocked()
            assert g.waiting == 0
            tg.start_soon(_hold, g, order, "third", release, False)
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert order == ["first", "third"]
    assert (g.busy, g.waiting) == (0, 0)


async def _hold_in(
    scope: anyio.CancelScope, g: StartGate, order: list[str], release: anyio.Event
) -> None:
    with scope:
        await _hold(g, order, "cancelled", release, False)


async def test_a_slot_handed_to_a_start_cancelled_at_that_moment_goes_to_the_next() -> None:
    g = StartGate(1)
    order: list[str] = []
    release = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            first = anyio.Event()
            tg.start_soon(_hold, g, order, "first", first, False)
            await anyio.wait_all_tasks_blocked()
            scope = anyio.CancelScope()
            tg.start_soon(_hold_in, scope, g, order, release)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(_hold, g, order, "third", release, False)
            await anyio.wait_all_tasks_blocked()
            # The first start ends and hands its slot to the waiter, which is cancelled
            # before it runs again.
            first.set()
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            assert order == ["first", "third"]
            release.set()
    assert (g.busy, g.waiting) == (0, 0)


async def test_a_limit_of_zero_lets_every_start_go_at_once() -> None:
    g = StartGate(0)
    order: list[str] = []
    release = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(_hold, g, order, str(i), release, bool(i % 2))
            await anyio.wait_all_tasks_blocked()
            assert len(order) == 50
            release.set()


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="0 or more, not -1"):
        StartGate(-1)


def test_the_default_is_four_a_cpu_and_at_least_eight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert gate.default_parallel_starts() == 8
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert gate.default_parallel_starts() == 64
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert gate.default_parallel_starts() == 8


class SlowStarts(FakeDocker):
    """Every start waits for :attr:`go`; :attr:`most` is the most starts under way at once."""

    def __init__(self) -> None:
        super().__init__(images=IMAGES)
        self.go = anyio.Event()
        self.starting = 0
        self.most = 0

    async def start_container(self, container_id: str) -> None:
        self.starting += 1
        self.most = max(self.most, self.starting)
        try:
            await self.go.wait()
            await super().start_container(container_id)
        finally:
            self.starting -= 1


def pods(n: int) -> list[Pod]:
    return [
        load_manifests_text(POD.replace("NAME", f"p{i}"), node_name="n1").pods[0] for i in range(n)
    ]


async def sync_at_once(
    n: int, *, limit: int, while_held: Callable[[SlowStarts, RuntimeManager], None]
) -> tuple[SlowStarts, RuntimeManager]:
    """``n`` pods synced at once on a runtime with ``limit``; ``while_held`` looks at the
    engine while no start may end yet, then every start goes on."""
    docker = SlowStarts()
    config = RuntimeConfig(node_name="n1", max_parallel_starts=limit)
    async with RuntimeManager(config, docker=docker) as rm:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for pod in pods(n):
                    tg.start_soon(rm.sync_pod, pod)
                await anyio.wait_all_tasks_blocked()
                while_held(docker, rm)
                docker.go.set()
    return docker, rm


async def test_the_runtime_creates_no_more_containers_at_once_than_its_limit() -> None:
    def held(docker: SlowStarts, rm: RuntimeManager) -> None:
        # Two sandboxes are being started; the third pod's waits for a slot and is not
        # even created.
        assert docker.count("create_container") == 2
        assert rm.starts.waiting == 1

    docker, rm = await sync_at_once(3, limit=2, while_held=held)
    assert docker.most == 2
    # Every pod got its sandbox and two containers.
    assert docker.count("start_container") == 9
    assert len(docker.containers) == 9
    assert (rm.starts.busy, rm.starts.waiting) == (0, 0)


async def test_a_runtime_with_no_limit_creates_every_sandbox_at_once() -> None:
    def held(docker: SlowStarts, rm: RuntimeManager) -> None:
        assert docker.count("create_container") == 5

    docker, _ = await sync_at_once(5, limit=0, while_held=held)
    assert len(docker.containers) == 15


class HeldNetwork(LoopbackPlugin):
    """Each pod's network set-up waits for :attr:`go`; :attr:`entered`: one has begun."""

    def __init__(self) -> None:
        self.go = anyio.Event()
        self.entered = anyio.Event()

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork:
        self.entered.set()
        await self.go.wait()
        return PodNetwork()


def pod_of(name: str) -> str:
    """The pod a container name of this runtime belongs to."""
    return name.split("_")[-4]


async def until(condition: Callable[[], bool]) -> None:
    """Once ``condition`` holds. A pod's sync reads and writes files in worker threads,
    which ``wait_all_tasks_blocked`` does not wait for: look again until it holds."""
    while True:
        await anyio.wait_all_tasks_blocked()
        if condition():
            return
        await anyio.sleep(0.005)


class StartsOneByOne(FakeDocker):
    """Each start waits for a permit the test gives (:meth:`allow`)."""

    def __init__(self) -> None:
        super().__init__(images=IMAGES)
        self.permits = anyio.Semaphore(0)

    def allow(self, n: int = 1) -> None:
        for _ in range(n):
            self.permits.release()

    async def start_container(self, container_id: str) -> None:
        await self.permits.acquire()
        await super().start_container(container_id)

    def made(self) -> list[str]:
        """The pod of each container created, in order."""
        return [pod_of(n) for n in self.targets("create_container")]


async def test_a_pods_containers_go_before_new_sandboxes_through_its_network_set_up() -> None:
    docker = StartsOneByOne()
    network = HeldNetwork()
    config = RuntimeConfig(node_name="n1", max_parallel_starts=1)
    async with RuntimeManager(config, docker=docker, network=network) as rm:
        gate = rm.starts
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for pod in pods(2):
                    tg.start_soon(rm.sync_pod, pod)
                try:
                    # One pod's sandbox is being started, the other's waits for the slot.
                    await until(lambda: len(docker.made()) == 1 and gate.waiting == 1)
                    first = docker.made()[0]
                    docker.allow()
                    # The first pod's sandbox is up and its network is being set up: the
                    # other pod's sandbox still waits.
                    await until(lambda: network.entered.is_set() and len(gate.claims) == 1)
                    assert docker.made() == [first]
                    network.go.set()
                    # The first pod's first container has the slot, its second waits
                    # ahead of the other pod's sandbox.
                    await until(lambda: len(docker.made()) == 2 and gate.waiting == 2)
                    docker.allow()
                    await until(lambda: len(docker.made()) == 3)
                    docker.allow()
                    await until(lambda: len(docker.made()) == 4)
                    assert docker.made() == [first] * 3 + [docker.made()[3]]
                    assert docker.made()[3] != first
                finally:
                    # The starts are shielded: let every one end whatever was found.
                    network.go.set()
                    docker.allow(6)
    assert "_POD_" in docker.targets("create_container")[3]
    assert len(docker.containers) == 6
    assert (gate.busy, gate.waiting, gate.claims) == (0, 0, set())


async def test_a_pod_that_pulls_an_image_leaves_its_slot_to_the_next_pod() -> None:
    docker = FakeDocker(images=IMAGES)
    pull = docker.hold("pull_image")
    pulling, ready = pods(2)
    assert pulling.spec is not None
    for container in pulling.spec.containers:
        container.image = "busybox:1.36"

    def made() -> list[str]:
        return [pod_of(n) for n in docker.targets("create_container")]

    config = RuntimeConfig(node_name="n1", max_parallel_starts=1)
    async with RuntimeManager(config, docker=docker) as rm:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(rm.sync_pod, pulling)
                try:
                    await until(lambda: made() == ["p0"] and docker.count("pull_image") == 1)
                    # The first pod waits for its image; the second comes up meanwhile.
                    tg.start_soon(rm.sync_pod, ready)
                    await until(lambda: len(made()) == 4)
                    assert made() == ["p0", "p1", "p1", "p1"]
                finally:
                    pull.set()
    assert len(docker.containers) == 6
    assert (rm.starts.busy, rm.starts.waiting, rm.starts.claims) == (0, 0, set())


def test_serve_in_cluster_mode_takes_the_limit_of_parallel_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, output, kubelet = cluster_serve(monkeypatch, tmp_path, "--max-parallel-starts", "4")
    assert code == 0, output
    assert kubelet is not None
    assert kubelet.max_parallel_starts == 4
    code, output, kubelet = cluster_serve(monkeypatch, tmp_path)
    assert kubelet is not None
    assert kubelet.max_parallel_starts == gate.default_parallel_starts()
    code, output, kubelet = cluster_serve(monkeypatch, tmp_path, "--max-parallel-starts", "-2")
    assert code == 2
    assert kubelet is None
