"""``asynckubelet reset``: remove the pod network a node made on the host.

``run`` and ``serve`` make the node's pod network once and keep it for the next pod, as a
kubelet's CNI bridge stays: the bridge backend's bridge, firewall chains (or nftables
tables) and address records, or the docker backend's ``akl-<node>`` network. ``reset``
takes them away, as ``kubeadm reset`` reverts what a node did to its host, once no pod
uses them: it refuses while a node daemon runs for the state dir or while a sandbox (of
any node, on any engine) is still on the network, naming the pods. It touches nothing
else: not the engine, its images, nor the state dir's manifests and objects.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio

from asynckubelet.cli.client import find_daemon
from asynckubelet.cli.options import LogOptions, NodeOptions, NodeRef, StateDirOpt
from asynckubelet.cli.output import command, fail, out, run_async

if TYPE_CHECKING:
    from asynckubelet.docker import DockerAPI
    from asynckubelet.network.cni import CNIPlugin
    from asynckubelet.network.dockernet import DockerNetworkPlugin

NAMED_AT_MOST = 5
"""Pods named when the bridge is still in use (then ``and N more``)."""


@command()
def reset(*, state_dir: StateDirOpt = None, node: NodeOptions, log: LogOptions) -> None:
    """Remove the pod network the node made on this host (bridge, firewall rules, address
    records) once no pod uses it.

    Give the network options `serve` or `run` had (--network, --bridge, --pod-cidr,
    --network-state-dir, --node-name, their variables): the bridge backend's bridge,
    firewall rules and address records go, or the docker backend's akl-<node> network.
    With --instance NAME, that instance's (and no other's).
    Refused while a node daemon runs for the state dir, or while a pod's sandbox is still
    on the network (they are named; delete those pods first). The engine, its images and
    the state dir's objects are left as they are.
    """
    ref = NodeRef(state_dir=state_dir)
    if find_daemon(ref) is not None:
        raise fail(
            f"a node daemon runs for state dir {ref.state}: stop it first "
            "(its pods keep using the pod network)"
        )
    lines = run_async(_reset, node)
    for line in lines:
        out.print(line, markup=False, highlight=False)


async def _reset(node: NodeOptions) -> list[str]:
    from asynckubelet import errors
    from asynckubelet.docker import DockerClient
    from asynckubelet.network.bridge import BridgePlugin
    from asynckubelet.network.cni import CNIPlugin
    from asynckubelet.network.dockernet import DockerNetworkPlugin

    async with DockerClient(url=node.docker_host, retry_attempts=1) as docker:
        plugin = node.network_plugin(docker, node_name=node.runtime_config().node_name)
        if isinstance(plugin, DockerNetworkPlugin):
            return [await _remove_docker_network(docker, plugin)]
        if isinstance(plugin, CNIPlugin):
            return [await _remove_cni_guard(docker, plugin)]
        if not isinstance(plugin, BridgePlugin):
            return [f"network {node.network}: the node made no pod network of its own on this host"]
        bridge = plugin.config.bridge
        if os.geteuid() != 0:
            raise fail(f"removing bridge {bridge} and its firewall rules needs root")
        present = (
            await anyio.Path("/sys/class/net", bridge).exists()
            or await anyio.Path(plugin.root).exists()
        )
        try:
            await plugin.sweep()
            attached = await plugin.attached()
            if attached:
                raise fail(await _in_use(docker, f"bridge {bridge}", attached))
            await plugin.remove_node_network()
        except errors.RuntimeUnavailable as e:
            raise _engine_needed(bridge, e) from e
        except errors.NetworkError as e:
            raise fail(f"removing the pod network of bridge {bridge}: {e}") from e
    if not present:
        return [f"no pod network of bridge {bridge} on this host: nothing to remove"]
    return [f"removed bridge {bridge}, its firewall rules and its address records ({plugin.root})"]


async def _remove_docker_network(docker: DockerAPI, plugin: DockerNetworkPlugin) -> str:
    """The ``docker`` backend's network of this node, removed once no sandbox is on it; a
    network of that name that another node (or someone else) made is left alone."""
    from asynckubelet import errors
    from asynckubelet.docker.labels import LABEL_NODE

    name = plugin.network
    try:
        info = await docker.inspect_network(name)
    except errors.NotFound:
        return f"no Docker network {name} on the engine: nothing to remove"
    except errors.RuntimeUnavailable as e:
        raise fail(f"cannot reach the Docker engine to remove network {name}: {e}") from e
    owner = (info.get("Labels") or {}).get(LABEL_NODE)
    if owner != plugin.node_name:
        raise fail(
            f"Docker network {name} is not node {plugin.node_name}'s "
            f"(label {LABEL_NODE}={owner!r}): left as it is"
        )
    attached = sorted((info.get("Containers") or {}).keys())
    if attached:
        raise fail(await _in_use(docker, f"Docker network {name}", attached))
    await plugin.remove_network()
    return f"removed Docker network {name}"


def _engine_needed(bridge: str, error: Exception) -> Exception:
    return fail(
        f"cannot tell which pods still use bridge {bridge}: {error}; "
        "start the engine their pods run on (`asynckubelet engine start`)"
    )


async def _remove_cni_guard(docker: DockerAPI, plugin: CNIPlugin) -> str:
    """The ``cni`` backend's bridge and addresses are its plugins'; what the node adds on
    the host is the loopback guard on the list's bridge, removed once no sandbox of the
    list is attached."""
    from asynckubelet import errors

    target = plugin.service_target()
    if target is None:
        return "network cni: the node made nothing on this host"
    bridge = target[1]
    try:
        await plugin.sweep()
    except errors.RuntimeUnavailable as e:
        raise _engine_needed(bridge, e) from e
    attached = sorted(plugin.cached_sandboxes())
    if attached:
        raise fail(await _in_use(docker, f"bridge {bridge}", attached))
    if os.geteuid() != 0:
        raise fail(f"removing the loopback guard of bridge {bridge} needs root")
    try:
        await plugin.unguard_localnet()
    except errors.NetworkError as e:
        raise fail(f"removing the loopback guard of bridge {bridge}: {e}") from e
    return f"removed the loopback guard of bridge {bridge} (its CNI plugins keep the rest)"


DELETE_HINT = (
    " (end the `asynckubelet run` that started them, or `asynckubelet delete pod NAME` while"
    " their node runs)"
)


async def _in_use(docker: DockerAPI, what: str, sandboxes: list[str]) -> str:
    """``bridge akl0 is in use by pods default/web, default/db: delete them first``."""
    from asynckubelet import errors
    from asynckubelet.runtime import naming

    names = []
    for sid in sandboxes[:NAMED_AT_MOST]:
        try:
            labels = (await docker.inspect_container(sid)).get("Config", {}).get("Labels") or {}
        except errors.DockerError:
            labels = {}
        name = labels.get(naming.LABEL_POD_NAME)
        namespace = labels.get(naming.LABEL_POD_NAMESPACE)
        names.append(f"{namespace}/{name}" if name and namespace else f"sandbox {sid[:12]}")
    more = len(sandboxes) - len(names)
    listed = ", ".join(names) + (f" and {more} more" if more > 0 else "")
    return f"{what} is in use by pods {listed}: delete them first{DELETE_HINT}"
