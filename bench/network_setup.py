"""Pod network setup and teardown time per backend, beside the bare netlink sequence.

For each round a pause container is started (not timed), then for each path its setup and
its teardown are timed; the paths take turns going first, so no path always runs right
after the slowest one:

- ``raw``: bare pyroute2 calls, the least a bridge backend must do: veth with the peer
  moved into the namespace, bridge port up, address, link up and default route inside.
- ``bridge``: ``BridgePlugin.setup_pod`` / ``teardown_pod`` (IPAM file, pod record,
  veth, namespace setup, hostPort chain).
- ``bridge-ds``: the same with IPv6 dual stack on (a second IPAM pool, the IPv6 address
  and route, IPv6 turned on in the namespace, the ip6tables hostPort chain).
- ``bridge-nft``: the ``bridge`` path with ``firewall="nftables"``: the pod's hostPort
  chain made and removed by ``nft`` batches instead of ``iptables-restore``.
- ``cni``: ``CNIPlugin`` running the project's conflist (bridge, host-local, portmap,
  firewall, loopback) from /usr/lib/cni.

- ``bridge@REV`` (with ``--baseline REV``): the ``bridge`` backend as it was at git
  revision REV (its ``bridge``, ``ipam`` and ``iptables`` modules loaded from that commit
  beside today's), to see a change's cost in the same run, under the same noise.

Run as root: ``python bench/network_setup.py [--rounds N] [--baseline REV]``. Uses its own
bridges, pod CIDRs and state directory, all removed at the end. Prints medians in
milliseconds.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from loguru import logger
from pyroute2 import AsyncIPRoute

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from asynckubelet.network import PodNetworkRequest, PortMapping, off_loop
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin
from asynckubelet.network.cni import CNIConfig, CNIPlugin
from asynckubelet.network.netlink import _in_netns_here
from asynckubelet.runtime import naming

PAUSE = image_build.DEFAULT_PAUSE_TAG
NODE = "akl-bench-net"
REPO = Path(__file__).resolve().parent.parent


async def raw(netns: str, index: int) -> tuple[float, float]:
    """The bare sequence, on the netlink thread as the backends run theirs."""
    host = f"aklraw{index % 1000}"
    started = time.perf_counter()
    await off_loop(functools.partial(_raw_plug, netns, host))
    setup = time.perf_counter() - started
    started = time.perf_counter()
    await off_loop(functools.partial(_raw_unplug, host))
    return setup, time.perf_counter() - started


async def _raw_plug(netns: str, host: str) -> None:
    async with AsyncIPRoute() as ipr:
        bridge = (await ipr.link_lookup(ifname="aklbenchraw"))[0]
        await ipr.link("add", ifname=host, kind="veth", peer={"ifname": "eth0", "net_ns_fd": netns})
        veth = (await ipr.link_lookup(ifname=host))[0]
        await ipr.link("set", index=veth, master=bridge, state="up")
    async with _in_netns_here(netns) as ns:
        eth0 = (await ns.link_lookup(ifname="eth0"))[0]
        await ns.addr("add", index=eth0, address="10.252.0.2", prefixlen=24)
        await ns.link("set", index=eth0, state="up")
        await ns.route("add", dst="0.0.0.0/0", gateway="10.252.0.1")


async def _raw_unplug(host: str) -> None:
    async with AsyncIPRoute() as ipr:
        await ipr.link("del", index=(await ipr.link_lookup(ifname=host))[0])


def baseline_bridge(rev: str, folder: Path, state: Path) -> Any:
    """A ``BridgePlugin`` of git revision ``rev``, as package ``akl_baseline``."""
    package = folder / "akl_baseline"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in ("bridge", "ipam", "iptables"):
        text = subprocess.run(
            ["git", "show", f"{rev}:asynckubelet/network/{name}.py"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for module in ("ipam", "iptables"):
            text = text.replace(f"asynckubelet.network.{module}", f"akl_baseline.{module}")
        (package / f"{name}.py").write_text(text)
    sys.path.insert(0, str(folder))
    old = importlib.import_module("akl_baseline.bridge")
    logger.disable("akl_baseline")
    return old.BridgePlugin(
        old.BridgeConfig(bridge="aklbenchold", pod_cidr="10.250.252.0/24", state_dir=state)
    )


def plugins_under_test(state: Path, baseline: str | None) -> dict[str, Any]:
    conf_dir = state / "net.d"
    conf_dir.mkdir()
    doc = json.loads((REPO / "asynckubelet" / "cni" / "10-asynckubelet.conflist").read_text())
    doc["name"] = "akl-bench"
    doc["plugins"][0]["bridge"] = "aklbenchcni"
    doc["plugins"][0]["ipam"]["ranges"] = [[{"subnet": "10.253.0.0/24"}]]
    doc["plugins"][0]["ipam"]["dataDir"] = str(state / "cni-ipam")
    (conf_dir / "10-bench.conflist").write_text(json.dumps(doc))
    bridge = BridgePlugin(
        BridgeConfig(bridge="aklbenchbr", pod_cidr="10.251.0.0/24", state_dir=state)
    )
    dual = BridgePlugin(
        BridgeConfig(
            bridge="aklbenchds",
            pod_cidr="10.250.251.0/24",
            pod_cidr_v6="fd00:ac1:b::/64",
            state_dir=state,
        )
    )
    nft = BridgePlugin(
        BridgeConfig(
            bridge="aklbenchnft", pod_cidr="10.250.250.0/24", state_dir=state, firewall="nftables"
        )
    )
    cni = CNIPlugin(CNIConfig(conf_dirs=(conf_dir,), cache_dir=state / "cni"))
    plugins: dict[str, Any] = {"bridge": bridge, "bridge-nft": nft, "bridge-ds": dual, "cni": cni}
    if baseline is not None:
        plugins[f"bridge@{baseline}"] = baseline_bridge(baseline, state / "baseline", state)
    return plugins


async def main(rounds: int, baseline: str | None) -> None:
    state = Path(tempfile.mkdtemp(prefix="akl-bench-net-"))
    plugins = plugins_under_test(state, baseline)
    times: dict[str, list[tuple[float, float]]] = {"raw": [], **{k: [] for k in plugins}}
    async with DockerClient() as docker:
        if not await docker.image_exists(PAUSE):
            await image_build.build_pause_image(docker, tag=PAUSE)
        async with AsyncIPRoute() as ipr:
            await ipr.link("add", ifname="aklbenchraw", kind="bridge")
            index = (await ipr.link_lookup(ifname="aklbenchraw"))[0]
            await ipr.addr("add", index=index, address="10.252.0.1", prefixlen=24)
            await ipr.link("set", index=index, state="up")
        for name, plugin in plugins.items():
            if name != "cni":
                await plugin.ensure_node_network()
        try:
            for i in range(rounds):
                paths = list(times)
                shift = i % len(paths)
                for path in paths[shift:] + paths[:shift]:
                    cid = await docker.create_container(
                        {
                            "Image": PAUSE,
                            "Labels": {naming.LABEL_NODE: NODE},
                            "HostConfig": {"NetworkMode": "none"},
                        },
                        name=f"akl-bench-net-{path.replace('@', '-')}-{i}",
                    )
                    try:
                        await docker.start_container(cid)
                        pid = (await docker.inspect_container(cid))["State"]["Pid"]
                        netns = f"/proc/{pid}/ns/net"
                        if path == "raw":
                            times[path].append(await raw(netns, i))
                            continue
                        plugin = plugins[path]
                        request = PodNetworkRequest(
                            sandbox_id=cid,
                            pod_name="bench",
                            namespace="default",
                            uid="u",
                            netns_path=netns,
                            port_mappings=(PortMapping(80, 40000 + i),),
                        )
                        started = time.perf_counter()
                        await plugin.setup_pod(request)
                        setup = time.perf_counter() - started
                        started = time.perf_counter()
                        await plugin.teardown_pod(sandbox_id=cid)
                        times[path].append((setup, time.perf_counter() - started))
                    finally:
                        await docker.remove_container(cid, force=True)
        finally:
            for name, plugin in plugins.items():
                if name != "cni":
                    await plugin.remove_node_network()
            async with AsyncIPRoute() as ipr:
                for name in ("aklbenchraw", "aklbenchcni"):
                    found = await ipr.link_lookup(ifname=name)
                    if found:
                        await ipr.link("del", index=found[0])
            shutil.rmtree(state, ignore_errors=True)
    print(f"{rounds} rounds, medians in ms (setup / teardown):")
    for path, pairs in times.items():
        setup = statistics.median(p[0] for p in pairs) * 1000
        teardown = statistics.median(p[1] for p in pairs) * 1000
        print(f"  {path:16s} {setup:7.1f} / {teardown:7.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--baseline", help="also time the bridge backend of this git revision")
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.baseline)
