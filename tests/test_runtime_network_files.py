"""A sandbox whose network namespace the node's backend makes: Docker leaves it alone
(``NetworkDisabled``: no network sandbox of Docker's, no ``libnetwork-setkey`` hook), and
the pod's resolv.conf and hosts file are the node's, written in the pod's directory and
mounted into every container, as the kubelet and the CRI runtimes do. Where the node
cannot write files the engine mounts (a remote engine) or another backend networks the
pod, Docker's files stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.volumes import VolumeManager
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.poddns import DNSSettings
from asynckubelet.runtime.types import PodRuntimeStatus
from asynckubelet.testing import FakeContainer, FakeDocker

pytestmark = pytest.mark.anyio

PAUSE = "pause:test"


def _pod() -> Pod:
    text = """
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  hostAliases: [{ip: 10.1.2.3, hostnames: [db.example]}]
  containers:
  - {name: app, image: busybox}
  - name: own
    image: busybox
    securityContext: {readOnlyRootFilesystem: true}
    volumeMounts: [{name: hosts, mountPath: /etc/hosts}]
  volumes: [{name: hosts, emptyDir: {}}]
"""
    return load_manifests_text(text, node_name="n1").pods[0]


def _empty(pod: Pod) -> PodRuntimeStatus:
    assert pod.metadata is not None
    return PodRuntimeStatus(uid=pod.metadata.uid or "", name="web", namespace="default")


def _of(docker: FakeDocker, kind: str, name: str = "") -> FakeContainer:
    (found,) = [
        c
        for c in docker.containers.values()
        if c.labels.get(naming.LABEL_TYPE) == kind
        and c.labels.get(naming.LABEL_CONTAINER_NAME, "") == name
    ]
    return found


def _mounts(container: FakeContainer) -> dict[str, tuple[str, bool]]:
    mounts = container.config.get("HostConfig", {}).get("Mounts") or []
    return {m["Target"]: (m["Source"], m["ReadOnly"]) for m in mounts}


async def _sync(tmp_path: Path, docker: FakeDocker) -> Pod:
    (tmp_path / "resolv.conf").write_text("nameserver 192.0.2.53\nsearch example.org\n")
    config = RuntimeConfig(
        node_name="n1",
        pause_image=PAUSE,
        dns=DNSSettings(cluster_dns=("10.96.0.10",), resolv_conf=str(tmp_path / "resolv.conf")),
    )
    volumes = VolumeManager(root=tmp_path / "pods", node_name="n1", use_tmpfs=False)
    pod = _pod()
    async with RuntimeManager(config, docker=docker, volumes=volumes) as rm:
        result = await rm.sync_pod(pod, _empty(pod))
    assert result.ok, result
    return pod


async def test_a_local_engine_leaves_the_namespace_to_the_node_which_mounts_its_files(
    tmp_path: Path,
) -> None:
    docker = FakeDocker(images=["busybox", PAUSE])
    pod = await _sync(tmp_path, docker)
    assert pod.metadata is not None
    pod_dir = tmp_path / "pods" / (pod.metadata.uid or "")
    sandbox = _of(docker, naming.TYPE_SANDBOX)
    assert sandbox.config.get("NetworkDisabled") is True
    assert sandbox.config["HostConfig"]["NetworkMode"] == "none"
    hosts = (pod_dir / "etc-hosts").read_text()
    assert hosts.startswith("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
    assert "10.1.2.3\tdb.example\n" in hosts
    resolv = (pod_dir / "resolv.conf").read_text()
    assert "nameserver 10.96.0.10" in resolv
    assert "search default.svc.cluster.local svc.cluster.local cluster.local" in resolv
    app = _mounts(_of(docker, naming.TYPE_CONTAINER, "app"))
    assert app["/etc/hosts"] == (str(pod_dir / "etc-hosts"), False)
    assert app["/etc/resolv.conf"] == (str(pod_dir / "resolv.conf"), False)
    own = _mounts(_of(docker, naming.TYPE_CONTAINER, "own"))
    assert own["/etc/resolv.conf"] == (str(pod_dir / "resolv.conf"), True)
    assert "emptyDir" in own["/etc/hosts"][0].replace("empty-dir", "emptyDir")


async def test_a_remote_engine_keeps_dockers_network_and_files(tmp_path: Path) -> None:
    docker = FakeDocker(images=["busybox", PAUSE], url="tcp://192.0.2.1:2376")
    await _sync(tmp_path, docker)
    assert "NetworkDisabled" not in _of(docker, naming.TYPE_SANDBOX).config
    assert "/etc/resolv.conf" not in _mounts(_of(docker, naming.TYPE_CONTAINER, "app"))
