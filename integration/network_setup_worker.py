"""A process that sets up one pod's bridge network, for tests that kill it half-way.

argv[1] is JSON: sandbox, netns, state, and either bridge and cidr (and cidr6 for dual
stack: the bridge backend) or ``backend: cni`` and conf_dir. It prints ``ready`` once
imported, then calls ``setup_pod`` with a hostPort mapping, so a kill lands inside the
setup.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from asynckubelet.network import NetworkPlugin, PodNetworkRequest, PortMapping
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin
from asynckubelet.network.cni import CNIConfig, CNIPlugin


async def main(spec: dict[str, str]) -> None:
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
