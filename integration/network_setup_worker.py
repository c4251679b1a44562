"""A process that sets up one pod's bridge network, for tests that kill it half-way.

argv[1] is JSON: sandbox, netns, state, and either bridge and cidr (and cidr6 for dual
stack: the bridge backend) or ``backend: cni`` and conf_dir. It prints ``ready`` once
imported, then calls ``setup_pod`` with a hostPort mapping, so a kill lands inside the
setup. With ``backend: docker``, node and manifest, Docker itself attaches the sandbox
while the runtime creates it, so the worker syncs the pod through the runtime instead, then
waits to be killed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from asynckubelet.docker import DockerClient
from asynckubelet.manifests import load_manifests
from asynckubelet.network import NetworkPlugin, PodNetworkRequest, PortMapping
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin
from asynckubelet.network.cni import CNIConfig, CNIPlugin
from asynckubelet.network.dockernet import DockerNetworkPlugin
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import PAUSE_IMAGE


async def sync_on_docker_network(spec: dict[str, str]) -> None:
    pod = load_manifests(spec["manifest"], node_name=spec["node"], pod_security="privileged").pods[
        0
    ]
    async with DockerClient() as docker:
        plugin = DockerNetworkPlugin(docker=docker, node_name=spec["node"])
        config = RuntimeConfig(node_name=spec["node"], pause_image=PAUSE_IMAGE)
        async with RuntimeManager(config, docker=docker, network=plugin) as rm:
            print("ready", flush=True)
            await rm.sync_pod(pod)
            print("done", flush=True)
            await anyio.sleep_forever()


async def main(spec: dict[str, str]) -> None:
    if spec.get("backend") == "docker":
        await sync_on_docker_network(spec)
        return
    plugin: NetworkPlugin
    if spec.get("backend") == "cni":
        plugin = CNIPlugin(
            CNIConfig(conf_dirs=(Path(spec["conf_dir"]),), cache_dir=Path(spec["state"]) / "cni")
        )
    else:
        plugin = BridgePlugin(
            BridgeConfig(
                bridge=spec["bridge"],
                pod_cidr=spec["cidr"],
                pod_cidr_v6=spec.get("cidr6"),
                state_dir=Path(spec["state"]),
            )
        )
    print("ready", flush=True)
    await plugin.setup_pod(
        PodNetworkRequest(
            sandbox_id=spec["sandbox"],
            pod_name="killed",
            namespace="default",
            uid="u",
            netns_path=spec["netns"],
            port_mappings=(PortMapping(container_port=80, host_port=51999),),
        )
    )
    print("done", flush=True)


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
