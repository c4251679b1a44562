"""``Kubelet`` embedded in an aiohttp application: request handlers drive real pods.

The pod turns Ready only after it has printed its line (a readiness probe on a file written
after the echo), so the handler that reads its logs has something to read."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from asynckubelet import KubeletConfig
from asynckubelet.docker import DockerClient
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node import Kubelet
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE

pytestmark = pytest.mark.anyio

NODE = web.AppKey("node", Kubelet)
POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: BUSYBOX
    command:
    - sh
    - -c
    - "trap 'exit 0' TERM; echo ready; touch /tmp/ready; while true; do sleep 0.2; done"
    readinessProbe:
      exec: {command: [cat, /tmp/ready]}
      periodSeconds: 1
"""


def make_app(config: KubeletConfig) -> web.Application:
    async def kubelet_ctx(app: web.Application) -> AsyncIterator[None]:
        async with Kubelet(config) as node:
            app[NODE] = node
            yield

    async def create(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        node = request.app[NODE]
        text = POD.replace("NAME", name).replace("BUSYBOX", BUSYBOX_IMAGE)
        await node.apply(load_manifests_text(text, node_name=node.node_name))
        pod = await node.wait("default", name, "Ready", timeout=60)
        assert pod is not None
        assert pod.status is not None
        return web.json_response({"name": name, "phase": pod.status.phase})

    async def logs(request: web.Request) -> web.Response:
        async with request.app[NODE].logs("default", request.match_info["name"]) as lines:
            return web.json_response([line.text async for line in lines])

    async def remove(request: web.Request) -> web.Response:
        deleted = await request.app[NODE].delete("default", request.match_info["name"])
        return web.json_response({"deleted": deleted})

    app = web.Application()
    app.cleanup_ctx.append(kubelet_ctx)
    app.router.add_post("/pods/{name}", create)
    app.router.add_get("/pods/{name}/logs", logs)
    app.router.add_delete("/pods/{name}", remove)
    return app


async def test_request_handlers_create_read_and_delete_pods(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    config = KubeletConfig(node_name=node_name, pause_image=PAUSE_IMAGE, state_dir=tmp_path / "s")
    runner = web.AppRunner(make_app(config))
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            async with http.post("/pods/app1") as r:
                assert await r.json() == {"name": "app1", "phase": "Running"}
            async with http.get("/pods/app1/logs") as r:
                assert await r.json() == ["ready"]
            async with http.delete("/pods/app1") as r:
                assert await r.json() == {"deleted": True}
        assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []
    finally:
        await runner.cleanup()


async def test_leaving_the_application_stops_its_pods(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    config = KubeletConfig(node_name=node_name, pause_image=PAUSE_IMAGE)
    runner = web.AppRunner(make_app(config))
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        async with (
            aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http,
            http.post("/pods/app2") as r,
        ):
            assert r.status == 200
    finally:
        await runner.cleanup()
    assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []
