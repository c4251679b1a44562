"""The composition root: a :class:`~asynckubelet.nodeapp.Node` built from a
:class:`~asynckubelet.nodeapp.NodeConfig` runs pods (and Jobs, with its controllers)
on a FakeDocker (with no pod network: ``network=None``), publishes itself only when
asked, and refuses a configuration that cannot run, naming the field."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from lightkube.models.core_v1 import Container, Pod, PodSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node.kubelet import KubeletConfig
from asynckubelet.nodeapp import HTTPEndpoint, Node, NodeConfig
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeContainer, FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"
PAUSE = "akltest.local/pause:3.10"


def kubelet(**changes: object) -> KubeletConfig:
    values: dict[str, object] = {
        "node_name": "n1",
        "pause_image": PAUSE,
        "docker_url": "tcp://fake:2375",
        "housekeeping_period": 3600.0,
        "resync_period": 0.05,
        **changes,
    }
    return KubeletConfig(**values)  # type: ignore[arg-type]


def docker() -> FakeDocker:
    return FakeDocker(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")


def once(name: str = "once") -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default"),
        spec=PodSpec(restartPolicy="Never", containers=[Container(name="c", image=BUSYBOX)]),
    )


def container(fake: FakeDocker, pod: str) -> FakeContainer:
    (found,) = [
        c
        for c in fake.containers.values()
        if c.labels.get(naming.LABEL_CONTAINER_NAME) == "c"
        and c.labels.get(naming.LABEL_POD_NAME) == pod
    ]
    return found


async def test_a_node_runs_a_pod_to_completion_and_removes_it_on_exit() -> None:
    fake = docker()
    with anyio.fail_after(20):
        async with Node(NodeConfig(kubelet=kubelet(), network=None), docker=fake) as node:
            await node.kubelet.apply(once())
            await node.kubelet.wait("default", "once", "Running")
            fake.exit(container(fake, "once").id, exit_code=0)
            ended = await node.kubelet.wait("default", "once", "Succeeded")
            assert ended is not None
            assert ended.status is not None
            assert ended.status.phase == "Succeeded"
            assert (node.services, node.http_port, node.socket) == (None, None, None)
    assert fake.containers == {}


async def test_a_node_with_controllers_runs_a_job_until_it_completes() -> None:
    from asynckubelet.manifests.loading import load_manifests_text

    fake = docker()
    job = (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec:\n  template:\n"
        "    spec:\n      restartPolicy: Never\n      containers:\n"
        f"      - {{name: c, image: {BUSYBOX}}}\n"
    )
    manifests = load_manifests_text(job)
    with anyio.fail_after(20):
        async with Node(NodeConfig(kubelet=kubelet(), network=None), docker=fake) as node:
            await node.kubelet.apply(manifests)
            while not fake.containers or not any(
                c.labels.get(naming.LABEL_CONTAINER_NAME) == "c" and c.status == "running"
                for c in fake.containers.values()
            ):
                await node.kubelet.status.changed()
            (made,) = [
                c
                for c in fake.containers.values()
                if c.labels.get(naming.LABEL_CONTAINER_NAME) == "c"
            ]
            fake.exit(made.id, exit_code=0)
            while True:
                stored = node.kubelet.objects.get("Job", "default", "once")
                assert stored is not None
                conditions = (dict(stored.body).get("status") or {}).get("conditions") or []
                if any(c.get("type") == "Complete" for c in conditions):
                    break
                with anyio.move_on_after(0.5):
                    await node.kubelet.status.changed()


async def test_a_node_without_controllers_leaves_a_job_alone() -> None:
    from asynckubelet.manifests.loading import load_manifests_text

    fake = docker()
    job = (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec:\n  template:\n"
        "    spec:\n      restartPolicy: Never\n      containers:\n"
        f"      - {{name: c, image: {BUSYBOX}}}\n"
    )
    with anyio.fail_after(20):
        config = NodeConfig(kubelet=kubelet(), network=None, controllers=False)
        async with Node(config, docker=fake) as node:
            await node.kubelet.apply(load_manifests_text(job))
            await node.kubelet.apply(once("beside"))
            await node.kubelet.wait("default", "beside", "Running")
            assert [p.metadata.name for p in node.kubelet.list() if p.metadata] == ["beside"]


async def test_a_node_with_a_local_api_publishes_itself_and_takes_it_back(tmp_path: Path) -> None:
    from asynckubelet.node.daemon import read_node_info

    fake = docker()
    config = NodeConfig(
        kubelet=kubelet(state_dir=tmp_path, manifest_dir=tmp_path / "manifests"),
        network=None,
        local_api=True,
        http=HTTPEndpoint(port=0),
    )
    with anyio.fail_after(20):
        async with Node(config, docker=fake) as node:
            info = read_node_info(tmp_path)
            assert info is not None
            assert node.info == info
            assert node.socket == tmp_path / "api.sock"
            assert node.socket.is_socket()
            assert node.http_port
            assert info.listen == f"http://127.0.0.1:{node.http_port}"
            assert (tmp_path / "serve.pid").exists()
    assert read_node_info(tmp_path) is None
    assert not (tmp_path / "api.sock").exists()
    assert not (tmp_path / "serve.pid").exists()


def published(state: Path) -> list[str]:
    """What of a node's published state is in ``state``."""
    return sorted(
        p.name for p in state.iterdir() if p.name in ("api.sock", "node.json", "serve.pid")
    )


async def test_a_node_that_cannot_listen_fails_naming_the_address_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    import socket

    from asynckubelet import errors

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = NodeConfig(
            kubelet=kubelet(state_dir=tmp_path, manifest_dir=tmp_path / "manifests"),
            network=None,
            local_api=True,
            http=HTTPEndpoint(port=port),
        )
        with anyio.fail_after(20), pytest.raises(errors.DaemonError) as refused:
            async with Node(config, docker=docker()):
                pass
    assert str(refused.value).startswith(f"cannot listen on 127.0.0.1:{port}: ")
    assert published(tmp_path) == []


@pytest.mark.parametrize("endpoint", ["http", "kube_api"])
async def test_a_taken_port_is_refused_before_the_kubelet_or_its_network_starts(
    tmp_path: Path, endpoint: str
) -> None:
    import socket

    from asynckubelet import errors
    from asynckubelet.nodeapp.config import KubeAPIEndpoint

    fake = docker()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports: dict[str, object] = (
            {"http": HTTPEndpoint(port=port)}
            if endpoint == "http"
            else {"http": None, "kube_api": KubeAPIEndpoint(port=port)}
        )
        config = NodeConfig(
            kubelet=kubelet(state_dir=tmp_path, manifest_dir=tmp_path / "manifests"),
            network=None,
            local_api=True,
            **ports,  # type: ignore[arg-type]
        )
        with anyio.fail_after(20), pytest.raises(errors.DaemonError) as refused:
            async with Node(config, docker=fake):
                pass
    assert str(refused.value).startswith(f"cannot listen on 127.0.0.1:{port}: ")
    assert fake.calls == []
    assert published(tmp_path) == []


async def test_an_error_in_the_block_reaches_the_caller_as_it_is() -> None:
    with anyio.fail_after(20), pytest.raises(LookupError, match="mine"):
        async with Node(NodeConfig(kubelet=kubelet(), network=None), docker=docker()):
            raise LookupError("mine")


async def test_the_kubelet_of_a_node_not_entered_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="enter it first"):
        Node(NodeConfig()).kubelet  # noqa: B018


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"local_api": True}, "NodeConfig.local_api"),
        ({"cluster": object()}, "NodeConfig.cluster"),
    ],
)
def test_a_config_that_cannot_run_names_its_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        NodeConfig(**changes)  # type: ignore[arg-type]
