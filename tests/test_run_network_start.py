"""A run's node network starts while its pods' sandboxes are made: a pod's network set-up
waits for the start, a start that fails ends the run with its error and leaves nothing on
Docker (``_Session.run``, its node on a FakeDocker; ``StartingPlugin`` on its own)."""

from __future__ import annotations

import anyio
import builders
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.cli.commands import run as run_command
from asynckubelet.cli.options import NodeOptions
from asynckubelet.docker import ContainerConfig
from asynckubelet.manifests import Manifests
from asynckubelet.network import LoopbackPlugin, PodNetwork, PodNetworkRequest, StartingPlugin
from asynckubelet.nodeapp.config import NetworkConfig
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"
PAUSE = "akltest.local/pause:3.10"


class SandboxDocker(FakeDocker):
    """Sets ``sandbox_made`` once a pod's sandbox is created; app containers end (exit code
    0) as soon as they start."""

    def __init__(self) -> None:
        super().__init__(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")
        self.sandbox_made = anyio.Event()

    async def create_container(self, config: ContainerConfig, *, name: str) -> str:
        made = await super().create_container(config, name=name)
        if (config.get("Labels") or {}).get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX:
            self.sandbox_made.set()
        return made

    async def start_container(self, container_id: str) -> None:
        await super().start_container(container_id)
        if self.containers[container_id].labels.get(naming.LABEL_TYPE) == naming.TYPE_CONTAINER:
            self.exit(container_id, exit_code=0)


class LateNetwork(LoopbackPlugin):
    """A node network whose start ends only after the first sandbox was made (a run that
    waited for the start before making any would wait for ever), then fails if told to."""

    name = "late"

    def __init__(self, docker: SandboxDocker, *, fail: bool = False) -> None:
        self.docker = docker
        self.fail = fail
        self.calls: list[str] = []

    async def start(self) -> None:
        await self.docker.sandbox_made.wait()
        if self.fail:
            raise errors.NetworkError("pod CIDR 192.0.2.0/24 overlaps the host route")
        self.calls.append("start")

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork:
        self.calls.append("setup_pod")
        return PodNetwork()

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        self.calls.append("teardown_pod")


def job() -> Pod:
    return builders.pod(
        "job", uid="u-job", containers=[builders.container("c", BUSYBOX)], restartPolicy="Never"
    )


class Pulls:
    """No pull happens: the images are there."""


def session(
    docker: SandboxDocker, network: LateNetwork, monkeypatch: pytest.MonkeyPatch
) -> run_command._Session:
    monkeypatch.setattr(NetworkConfig, "plugin", lambda *args, **kwargs: network)
    node = NodeOptions(node_name="n1", pause_image=PAUSE, docker_host="tcp://fake:2375")
    return run_command._Session(
        node=node,
        config=run_command._kubelet_config(node, owner="run-test"),
        pulls=Pulls(),  # type: ignore[arg-type]
        docker=docker,
    )


def manifests(*pods: Pod) -> Manifests:
    return Manifests(pods=pods)


async def test_a_run_makes_the_sandbox_while_the_node_network_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docker = SandboxDocker()
    network = LateNetwork(docker)
    with anyio.fail_after(10):
        outcomes = await session(docker, network, monkeypatch).run(manifests(job()))
    assert [o.phase for o in outcomes] == ["Succeeded"]
    assert network.calls[:2] == ["start", "setup_pod"]
    assert not docker.containers


async def test_a_failed_network_start_ends_the_run_with_its_error_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docker = SandboxDocker()
    network = LateNetwork(docker, fail=True)
    with anyio.fail_after(10), pytest.raises(BaseExceptionGroup) as raised:
        await session(docker, network, monkeypatch).run(manifests(job()))
    leaves = leaves_of(raised.value)
    assert [type(e) for e in leaves] == [errors.NetworkError]
    assert "overlaps the host route" in str(leaves[0])
    assert docker.sandbox_made.is_set()
    assert "setup_pod" not in network.calls
    assert not docker.containers


def leaves_of(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves_of(inner)]
    return [error]


class Gate(LateNetwork):
    """A start that ends when ``opened`` is set, failing when ``fail``."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__(SandboxDocker(), fail=fail)
        self.opened = anyio.Event()

    async def start(self) -> None:
        await self.opened.wait()
        self.calls.append("start")
        if self.fail:
            raise errors.NetworkError("no bridge")


def request() -> PodNetworkRequest:
    return PodNetworkRequest(
        pod_name="web", namespace="default", uid="u1", sandbox_id="s1", netns_path=""
    )


async def test_a_pods_set_up_waits_for_the_start_under_way() -> None:
    gate = Gate()
    plugin = StartingPlugin(gate)
    async with anyio.create_task_group() as tg:
        tg.start_soon(plugin.start)
        tg.start_soon(plugin.setup_pod, request())
        await anyio.wait_all_tasks_blocked()
        assert gate.calls == []
        gate.opened.set()
    assert gate.calls == ["start", "setup_pod"]


async def test_a_failed_start_fails_each_set_up_with_its_message_and_still_tears_down() -> None:
    gate = Gate(fail=True)
    plugin = StartingPlugin(gate)
    gate.opened.set()
    with pytest.raises(errors.NetworkError, match="no bridge"):
        await plugin.start()
    with pytest.raises(errors.NetworkError, match="the node's network did not start: no bridge"):
        await plugin.setup_pod(request())
    await plugin.teardown_pod(sandbox_id="s1")
    assert gate.calls == ["start", "teardown_pod"]
    assert await plugin.status() == (False, "the node's network did not start: no bridge")


async def test_a_start_never_begun_is_not_waited_for() -> None:
    gate = Gate()
    plugin = StartingPlugin(gate)
    with anyio.fail_after(5):
        await plugin.teardown_pod(sandbox_id="s1")
    assert gate.calls == ["teardown_pod"]
