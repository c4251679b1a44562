"""``Kubelet`` as a library against real Docker: apply, converge, adopt, clean up."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest

from asynckubelet import AsyncKubeletError, KubeletConfig
from asynckubelet.docker import DockerClient
from asynckubelet.manifests import Manifests, load_manifests_text
from asynckubelet.node import Kubelet
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE
from integration.runtime_helpers import finished_syncs

pytestmark = pytest.mark.anyio

SLEEPER = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; echo started a; while true; do sleep 0.2; done"]
    env: [{name: WHO, value: "A_VALUE"}]
  - name: b
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


def sleeper(name: str = "web", *, node: str, value: str = "one") -> Manifests:
    text = SLEEPER.replace("NAME", name).replace("BUSYBOX", BUSYBOX_IMAGE)
    return load_manifests_text(text.replace("A_VALUE", value), node_name=node)


def config(node: str, tmp_path: Path, **kwargs: object) -> KubeletConfig:
    return KubeletConfig(
        node_name=node,
        pause_image=PAUSE_IMAGE,
        state_dir=tmp_path / "state",
        **kwargs,  # type: ignore[arg-type]
    )


async def container_ids(docker: DockerClient, node: str) -> dict[str, str]:
    rows = await docker.list_containers(
        labels={naming.LABEL_NODE: node, naming.LABEL_TYPE: naming.TYPE_CONTAINER}
    )
    return {
        (r.get("Labels") or {})[naming.LABEL_CONTAINER_NAME]: r["Id"]
        for r in rows
        if r.get("State") == "running"
    }


async def test_an_applied_pod_becomes_ready_and_is_listed_with_its_status(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path)) as node:
        await node.apply(sleeper(node=node_name))
        pod = await node.wait("default", "web", "Ready", timeout=60)
        assert pod is not None
        assert pod.status is not None
        assert pod.status.phase == "Running"
        assert [p.metadata.name for p in node.list() if p.metadata] == ["web"]
        names = {c.name for c in pod.status.containerStatuses or []}
        assert names == {"a", "b"}


async def test_a_deleted_pod_leaves_no_container_behind(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path)) as node:
        await node.apply(sleeper(node=node_name))
        await node.wait("default", "web", "Ready", timeout=60)
        assert await node.delete("default", "web", grace_period=5)
        assert node.get("default", "web") is None
        assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []


async def test_an_edited_env_restarts_only_the_changed_container(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path)) as node:
        await node.apply(sleeper(node=node_name, value="one"))
        await node.wait("default", "web", "Ready", timeout=60)
        before = await container_ids(docker, node_name)
        await node.apply(sleeper(node=node_name, value="two"))

        with anyio.fail_after(60):
            while True:
                now = await container_ids(docker, node_name)
                if now.get("a") not in (None, before["a"]):
                    break
                await anyio.sleep(0.2)
        await node.wait("default", "web", "Ready", timeout=60)
        after = await container_ids(docker, node_name)
        assert after["b"] == before["b"]
        assert after["a"] != before["a"]
        info = await docker.inspect_container(after["a"])
        assert "WHO=two" in (info.get("Config") or {}).get("Env", [])


async def test_a_restarted_node_adopts_running_pods_without_restarting_them(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path, leave_running=True)) as node:
        await node.apply(sleeper(node=node_name))
        await node.wait("default", "web", "Ready", timeout=60)
    before = await container_ids(docker, node_name)
    assert set(before) == {"a", "b"}
    async with Kubelet(config(node_name, tmp_path)) as node:
        await node.apply(sleeper(node=node_name))
        pod = await node.wait("default", "web", "Ready", timeout=60)
        # Ready is reported before the sync that follows it.
        with anyio.fail_after(60):
            while finished_syncs(node.metrics.render()) < 1:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        assert await container_ids(docker, node_name) == before
        assert pod is not None
        assert pod.status is not None
        assert [c.restartCount for c in pod.status.containerStatuses or []] == [0, 0]


async def test_housekeeping_removes_pods_that_no_source_wants(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path, leave_running=True)) as node:
        await node.apply(sleeper(node=node_name))
        await node.wait("default", "web", "Ready", timeout=60)
    async with Kubelet(config(node_name, tmp_path, housekeeping_period=3600)) as node:
        removed = await node.housekeeping()
    assert len(removed) == 1
    assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []


async def test_events_are_recorded_and_streamed(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path)) as node:
        seen: list[str] = []
        async with anyio.create_task_group() as tg:

            async def collect() -> None:
                async with node.events(history=True) as events:
                    async for event in events:
                        seen.append(event.reason)

            tg.start_soon(collect)
            await node.apply(sleeper(node=node_name))
            await node.wait("default", "web", "Ready", timeout=60)
            tg.cancel_scope.cancel()
        assert "Started" in seen
        assert (tmp_path / "state" / "events.jsonl").read_text().count('"Started"') >= 2


async def test_watch_reports_added_then_deleted(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path)) as node:
        kinds: list[str] = []
        async with anyio.create_task_group() as tg:

            async def collect() -> None:
                async with node.watch() as changes:
                    async for kind, _pod in changes:
                        kinds.append(kind)
                        if kind == "DELETED":
                            return

            tg.start_soon(collect)
            await node.apply(sleeper(node=node_name))
            await node.wait("default", "web", "Ready", timeout=60)
            await node.delete("default", "web", grace_period=2)
        assert kinds[0] == "ADDED"
        assert kinds[-1] == "DELETED"


async def test_a_manifest_file_starts_its_pod_and_removing_it_deletes_the_pod(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    async with Kubelet(config(node_name, tmp_path, manifest_dir=manifests)) as node:
        text = textwrap.dedent(SLEEPER).replace("NAME", "static").replace("BUSYBOX", BUSYBOX_IMAGE)
        (manifests / "static.yaml").write_text(text.replace("A_VALUE", "x"))
        await node.wait("default", "static", "Ready", timeout=60)
        (manifests / "static.yaml").unlink()
        await node.wait("default", "static", "Deleted", timeout=60)
        assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []


def _laughs() -> str:
    text = "a0: &a0 lol\n"
    for level in range(1, 10):
        text += f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]\n"
    return text


LOWERING = """
apiVersion: v1
kind: Namespace
metadata:
  name: infra
  labels: {pod-security.kubernetes.io/enforce: privileged}
---
apiVersion: v1
kind: Pod
metadata: {name: root, namespace: infra}
spec:
  hostPID: true
  containers: [{name: sh, image: BUSYBOX, securityContext: {privileged: true}}]
"""


async def test_bad_manifest_files_are_reported_as_events_and_the_good_ones_still_run(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "bomb.yaml").write_text(_laughs())
    (manifests / "big.yaml").write_bytes(b"#" * (3 * 1024 * 1024 + 1))
    (manifests / "lower.yaml").write_text(LOWERING.replace("BUSYBOX", BUSYBOX_IMAGE))
    async with Kubelet(config(node_name, tmp_path, manifest_dir=manifests)) as node:
        (manifests / "garbage.yaml").write_bytes(b"kind: Pod\n\xff\xfe\x00")
        text = textwrap.dedent(SLEEPER).replace("NAME", "static").replace("BUSYBOX", BUSYBOX_IMAGE)
        (manifests / "static.yaml").write_text(text.replace("A_VALUE", "x"))
        await node.wait("default", "static", "Ready", timeout=60)
        with anyio.fail_after(30):
            while True:
                events = {e.pod: e for e in node.recorder.list() if e.reason == "FailedValidation"}
                if len(events) == 4:
                    break
                await anyio.sleep(0.1)
        assert sorted(events) == ["big.yaml", "bomb.yaml", "garbage.yaml", "lower.yaml"]
        assert {e.type for e in events.values()} == {"Warning"}
        assert "document contains excessive aliasing" in events["bomb.yaml"].message
        assert "Too long: must have at most 3145728 bytes" in events["big.yaml"].message
        assert 'violates PodSecurity "baseline:latest"' in events["lower.yaml"].message
        assert node.get("infra", "root") is None
    assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []


async def test_logs_and_exec_reach_the_pods_containers(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path)) as node:
        await node.apply(sleeper(node=node_name))
        await node.wait("default", "web", "Ready", timeout=60)
        # Ready comes with the start; the line reaches the log when Docker has copied it.
        lines: list[str] = []
        with anyio.fail_after(30):
            while not lines:
                lines = [
                    line.text for line in await node.read_logs("default", "web", container="a")
                ]
                await anyio.sleep(0.05)
        assert lines == ["started a"]
        result = await node.exec("default", "web", ["sh", "-c", "echo $WHO"], container="a")
        assert (result.exit_code, result.stdout) == (0, b"one\n")


async def test_cancelling_the_owner_stops_and_removes_the_pods(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    with anyio.CancelScope() as scope:
        async with Kubelet(config(node_name, tmp_path)) as node:
            await node.apply(sleeper(node=node_name))
            await node.wait("default", "web", "Ready", timeout=60)
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []


async def test_a_new_spec_applied_during_a_sync_is_not_lost(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    async with Kubelet(config(node_name, tmp_path)) as node:
        await node.apply(sleeper(node=node_name, value="one"))
        await node.apply(sleeper(node=node_name, value="two"))
        await node.apply(sleeper(node=node_name, value="three"))
        await node.wait("default", "web", "Ready", timeout=60)
        with anyio.fail_after(60):
            while True:
                try:
                    result = await node.exec(
                        "default", "web", ["sh", "-c", "echo $WHO"], container="a"
                    )
                except AsyncKubeletError:
                    result = None
                if result is not None and result.stdout == b"three\n":
                    break
                await anyio.sleep(0.2)
