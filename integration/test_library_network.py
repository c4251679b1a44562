"""A library node built with the default configuration gives its pods an IP on the host's
default pod network, as ``run`` and ``serve`` do, and the host reaches a pod on it."""

from __future__ import annotations

import ipaddress
import urllib.request

import anyio
import anyio.to_thread
import pytest

from asynckubelet import KubeletConfig, Node, NodeConfig, load_manifests_text
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine

pytestmark = pytest.mark.anyio

POD = f"""
apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: httpd
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, "echo hello-from-the-library > /tmp/i.html; exec httpd -f -p 8080 -h /tmp"]
    readinessProbe:
      tcpSocket: {{port: 8080}}
      periodSeconds: 1
"""


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read(4096).decode())


async def test_a_default_library_node_gives_a_pod_an_ip_the_host_reaches(
    docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    kubelet = KubeletConfig(node_name=node_name, pause_image=PAUSE_IMAGE, shutdown_timeout=30)
    config = NodeConfig(kubelet=kubelet)
    assert config.network is not None
    with anyio.fail_after(120):
        async with Node(config) as node:
            await node.kubelet.apply(load_manifests_text(POD, node_name=node_name))
            pod = await node.kubelet.wait("default", "web", "Ready", timeout=90)
            assert pod is not None
            assert pod.status is not None
            ip = pod.status.podIP or ""
            assert not ipaddress.ip_address(ip).is_loopback
            assert await anyio.to_thread.run_sync(fetch, f"http://{ip}:8080/i.html") == (
                "hello-from-the-library\n"
            )
