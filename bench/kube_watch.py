"""How long a pod's change takes to reach a Kubernetes watch client of the node's API.

Builds a node in this process (the project's fake Docker engine: no containers) with its
Kubernetes API on a free loopback port over mutual TLS, opens a watch of the pods as
kubectl does (``?watch=1&resourceVersion=<list's>``, aiohttp with the node's client
certificate), then records ``--changes`` new statuses of one pod, one after another, as
the kubelet's status manager records a change it saw, and times each from the record
to the client having parsed the event line. Prints p50, p99 and maximum.
Run: ``python bench/kube_watch.py [--changes 20]``.
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import anyio
from lightkube.models.core_v1 import Container, Pod, PodSpec, PodStatus
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.api.kube import pki
from asynckubelet.api.kube.server import KubeAPI, serve_kube_api
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.testing import FakeDocker


async def measure(changes: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="kwatch-bench-") as tmp:
        state = Path(tmp) / "state"
        config = KubeletConfig(node_name="bench", state_dir=state, housekeeping_period=3600)
        node = Kubelet(config, docker=FakeDocker())
        pod = Pod(
            metadata=ObjectMeta(name="web", namespace="default", uid="uid-bench-web"),
            spec=PodSpec(containers=[Container(name="c", image="busybox")]),
        )
        async with node, anyio.create_task_group() as tg:
            api: KubeAPI = await tg.start(
                lambda task_status: serve_kube_api(
                    node, state_dir=state, host="127.0.0.1", port=0, task_status=task_status
                )
            )
            directory = state / pki.PKI_DIR
            context = ssl.create_default_context(cafile=directory / "ca.crt")
            context.load_cert_chain(directory / "admin.crt", directory / "admin.key")
            node.status.set(pod, PodStatus(phase="Pending", message="0"))
            times: list[float] = []
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{api.url}/api/v1/pods", ssl=context) as listed:
                    version = (await listed.json())["metadata"]["resourceVersion"]
                path = f"{api.url}/api/v1/pods?watch=1&resourceVersion={version}"
                async with session.get(path, ssl=context) as watch:
                    for i in range(1, changes + 1):
                        start = time.perf_counter()
                        node.status.set(pod, PodStatus(phase="Pending", message=str(i)))
                        event = json.loads(await watch.content.readline())
                        times.append(time.perf_counter() - start)
                        assert event["object"]["status"]["message"] == str(i)
                        await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args()
    times = sorted(anyio.run(measure, args.changes))
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(
        f"watch latency over {len(times)} changes: p50 {statistics.median(times) * 1000:.2f} ms,"
        f" p99 {p99 * 1000:.2f} ms, max {times[-1] * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
