"""A node in the foreground, as ``run`` uses it: pods taken all or none, their output and
statuses shown where the node was told, how each ended readable once its worker ended,
a kill at once that SIGKILLs every pod, and the node's network started while the first
sandbox is made (a Kubelet on a FakeDocker)."""

from __future__ import annotations

import anyio
import pytest
from lightkube.models.core_v1 import Container, ContainerPort, Pod, PodSpec, PodStatus
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors
from asynckubelet.docker import ContainerConfig, LogLine
from asynckubelet.manifests import Manifests
from asynckubelet.network import LoopbackPlugin, PodNetwork, PodNetworkRequest
from asynckubelet.node.foreground import PodOutput
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"
PAUSE = "akltest.local/pause:3.10"


class EndingDocker(FakeDocker):
    """App containers print ``hello from NAME`` and end with the exit code their command
    names (``["exit", "3"]``; 0 without one); ``sandbox_made`` is set once a sandbox is."""

    def __init__(self) -> None:
        super().__init__(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")
        self.sandbox_made = anyio.Event()
        self.stays: set[str] = set()
        """Container names whose process runs until stopped."""

    async def create_container(self, config: ContainerConfig, *, name: str) -> str:
        made = await super().create_container(config, name=name)
        if (config.get("Labels") or {}).get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX:
            self.sandbox_made.set()
        return made

    async def start_container(self, container_id: str) -> None:
        await super().start_container(container_id)
        container = self.containers[container_id]
        labels = container.labels
        name = labels.get(naming.LABEL_CONTAINER_NAME, "")
        if labels.get(naming.LABEL_TYPE) != naming.TYPE_CONTAINER or name in self.stays:
            return
        self.log_lines[container_id] = [LogLine(stream="stdout", text=f"hello from {name}")]
        command = list(container.config.get("Entrypoint") or [])
        self.exit(container_id, exit_code=int(command[1]) if command[:1] == ["exit"] else 0)


def _config(**changes: object) -> KubeletConfig:
    settings: dict[str, object] = {
        "node_name": "n1",
        "pause_image": PAUSE,
        "docker_url": "tcp://fake:2375",
        "housekeeping_period": 3600.0,
        "resync_period": 0.05,
        "exit_when_terminal": True,
        "check_host_ports": False,
        "shutdown_timeout": None,
        "metrics": False,
    }
    settings.update(changes)
    return KubeletConfig(**settings)  # type: ignore[arg-type]


def _pod(
    name: str, *, exit_code: int = 0, host_port: int | None = None, policy: str = "Never"
) -> Pod:
    ports = [ContainerPort(containerPort=80, hostPort=host_port)] if host_port else None
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default", uid=f"u-{name}"),
        spec=PodSpec(
            restartPolicy=policy,
            terminationGracePeriodSeconds=3600,
            containers=[
                Container(name="app", image=BUSYBOX, command=["exit", str(exit_code)], ports=ports)
            ],
        ),
    )


def _loaded(*pods: Pod) -> Manifests:
    """The pods as a run hands them over: loaded already, each with its own UID."""
    return Manifests(pods=pods)


def _app(docker: FakeDocker, pod: str) -> str:
    (found,) = [
        c.id
        for c in docker.containers.values()
        if c.labels.get(naming.LABEL_CONTAINER_NAME) == "app"
        and c.labels.get(naming.LABEL_POD_NAME) == pod
    ]
    return found


async def test_pods_that_do_not_all_fit_are_refused_together_and_nothing_starts() -> None:
    docker = EndingDocker()
    with anyio.fail_after(20):
        async with Kubelet(_config(), docker=docker) as node:
            refused = await node.admit_all(
                _loaded(_pod("first", host_port=8080), _pod("second", host_port=8080)),
                source=API_SOURCE,
            )
            assert [(p.metadata.name if p.metadata else "", r.reason) for p, r in refused] == [
                ("second", "NodePorts")
            ]
            assert not node.has_pod("u-first")
            assert node.objects.list("Pod") == []
            refused = await node.admit_all(
                _loaded(_pod("third", host_port=9090)),
                running=[_pod("theirs", host_port=9090)],
                source=API_SOURCE,
            )
            assert [r.reason for _, r in refused] == ["NodePorts"]
    assert docker.count("create_container") == 0


async def test_admitted_pods_run_to_their_end_and_their_outcomes_stay_readable() -> None:
    docker = EndingDocker()
    with anyio.fail_after(20):
        async with Kubelet(_config(), docker=docker) as node:
            pods = _loaded(_pod("fine"), _pod("broken", exit_code=3))
            assert await node.admit_all(pods, source=API_SOURCE) == []
            await node.wait_ended(["u-fine", "u-broken"])
            fine, broken = node.outcome("u-fine"), node.outcome("u-broken")
    assert fine is not None
    assert broken is not None
    assert (fine.phase, fine.exit_code, fine.stopped) == ("Succeeded", 0, False)
    assert (broken.phase, broken.exit_code) == ("Failed", 3)
    assert node.outcome("u-never") is None
    assert docker.containers == {}


async def test_keep_and_the_grace_period_given_at_admission_apply_to_each_pod() -> None:
    docker = EndingDocker()
    with anyio.fail_after(20):
        async with Kubelet(_config(), docker=docker) as node:
            await node.admit_all(
                _loaded(_pod("kept")), source=API_SOURCE, keep=True, grace_period=7
            )
            entry_options = node._entries["u-kept"].worker.options
            assert (entry_options.keep, entry_options.grace_period) == (True, 7)
            await node.wait_ended(["u-kept"])
    assert _app(docker, "kept") in docker.containers


async def test_the_pods_output_and_statuses_go_where_the_node_was_told() -> None:
    docker = EndingDocker()
    lines: list[tuple[str, str, str]] = []
    phases: list[str] = []

    def log(pod: Pod, container: str, line: LogLine) -> None:
        lines.append(((pod.metadata.name if pod.metadata else None) or "", container, line.text))

    def status(pod: Pod, status: PodStatus) -> None:
        phases.append(status.phase or "")

    output = PodOutput(logs=log, statuses=status)
    with anyio.fail_after(20):
        async with Kubelet(_config(), docker=docker, output=output) as node:
            await node.admit_all(_loaded(_pod("talker")), source=API_SOURCE)
            await node.wait_ended(["u-talker"])
    assert lines == [("talker", "app", "hello from app")]
    assert phases[-1] == "Succeeded"
    assert "Pending" in phases


@pytest.mark.parametrize("record", [True, False])
async def test_a_node_keeps_its_pods_events_only_when_asked(record: bool) -> None:
    docker = EndingDocker()
    with anyio.fail_after(20):
        async with Kubelet(_config(record_events=record), docker=docker) as node:
            await node.admit_all(_loaded(_pod("talker")), source=API_SOURCE)
            await node.wait_ended(["u-talker"])
            reasons = {e.reason for e in node.recorder.list(uid="u-talker")}
    assert ("Started" in reasons) is record


async def test_a_closed_output_is_not_followed() -> None:
    docker = EndingDocker()
    lines: list[str] = []
    closed = anyio.Event()
    closed.set()
    output = PodOutput(logs=lambda pod, c, line: lines.append(line.text), closed=closed)
    with anyio.fail_after(20):
        async with Kubelet(_config(), docker=docker, output=output) as node:
            await node.admit_all(_loaded(_pod("talker")), source=API_SOURCE)
            await node.wait_ended(["u-talker"])
    assert lines == []
    assert docker.count("logs") == 0


async def test_a_kill_now_ends_a_graceful_stop_at_once_and_the_pod_is_still_removed() -> None:
    docker = EndingDocker()
    docker.stays.add("app")
    running = anyio.Event()

    def status(pod: Pod, status: PodStatus) -> None:
        if status.phase == "Running":
            running.set()

    node = Kubelet(_config(), docker=docker, output=PodOutput(statuses=status))
    stopping = anyio.Event()
    stubborn = _loaded(_pod("stubborn", policy="Always"))

    async def run() -> None:
        async with node:
            await node.admit_all(stubborn, source=API_SOURCE)
            await running.wait()
            docker.containers[_app(docker, "stubborn")].ignores_stop_signal = True
            stopping.set()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await stopping.wait()
            app = _app(docker, "stubborn")
            await anyio.wait_all_tasks_blocked()
            assert docker.count("kill_container") == 0
            assert app in docker.containers
            node.kill_now()
    assert app in docker.targets("kill_container")
    outcome = node.outcome("u-stubborn")
    assert outcome is not None
    assert outcome.stopped
    assert docker.containers == {}


class LateNetwork(LoopbackPlugin):
    """A node network whose start ends only after the first sandbox was made (a node that
    waited for the start before making any would wait for ever), then fails if told to."""

    name = "late"

    def __init__(self, docker: EndingDocker, *, fail: bool = False) -> None:
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


async def test_the_network_starts_with_the_first_pod_while_its_sandbox_is_made() -> None:
    docker = EndingDocker()
    network = LateNetwork(docker)
    config = _config(start_network_with_pods=True)
    with anyio.fail_after(10):
        async with Kubelet(config, docker=docker, network=network) as node:
            assert network.calls == []
            await node.admit_all(_loaded(_pod("job")), source=API_SOURCE)
            await node.wait_ended(["u-job"])
            outcome = node.outcome("u-job")
    assert outcome is not None
    assert outcome.phase == "Succeeded"
    assert network.calls[:2] == ["start", "setup_pod"]
    assert docker.containers == {}


async def test_a_network_that_fails_to_start_ends_the_node_with_its_error_and_leaves_nothing() -> (
    None
):
    docker = EndingDocker()
    network = LateNetwork(docker, fail=True)
    config = _config(start_network_with_pods=True)

    async def run() -> None:
        async with Kubelet(config, docker=docker, network=network) as node:
            await node.admit_all(_loaded(_pod("job")), source=API_SOURCE)
            await node.wait_ended(["u-job"])

    with anyio.fail_after(10), pytest.raises(BaseExceptionGroup) as raised:
        await run()
    leaves = _leaves(raised.value)
    assert [type(e) for e in leaves] == [errors.NetworkError]
    assert "overlaps the host route" in str(leaves[0])
    assert docker.sandbox_made.is_set()
    assert "setup_pod" not in network.calls
    assert docker.containers == {}


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]
