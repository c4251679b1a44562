"""resolv.conf and /etc/hosts inside real pods, per dnsPolicy, as every container sees them,
on each network backend (bridge, cni, docker): the files are the kubelet's whatever the
backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.network import NetworkPlugin
from asynckubelet.network.dns import DNSSettings, parse_resolv_conf
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import PAUSE_IMAGE
from integration.network_helpers import pod_from
from integration.runtime_helpers import Driver, Recorder

pytest_plugins = ["integration.network_fixtures"]

pytestmark = pytest.mark.anyio

CLUSTER_DNS = DNSSettings(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local")
HEADER = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


def _manager(
    docker: DockerClient,
    node: str,
    backend_plugin: NetworkPlugin,
    dns: DNSSettings,
    events: Recorder,
) -> RuntimeManager:
    return RuntimeManager(
        RuntimeConfig(node_name=node, pause_image=PAUSE_IMAGE, dns=dns),
        docker=docker,
        network=backend_plugin,
        events=events,
    )


def _pod(spec_extra: str, *, name: str = "dns") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: shop}}
spec:
{spec_extra}
  containers:
  - name: one
    image: BUSYBOX
    command: ["sleep", "3600"]
  - name: two
    image: BUSYBOX
    command: ["sleep", "3600"]
"""


async def _files(docker: DockerClient, node: str, container: str) -> tuple[str, str]:
    rows = await docker.list_containers(labels={naming.LABEL_NODE: node})
    cid = next(
        r["Id"]
        for r in rows
        if (r.get("Labels") or {}).get(naming.LABEL_CONTAINER_NAME) == container
    )
    resolv = await docker.exec_run(cid, ["cat", "/etc/resolv.conf"], timeout=10)
    hosts = await docker.exec_run(cid, ["cat", "/etc/hosts"], timeout=10)
    return resolv.stdout.decode(), hosts.stdout.decode()


async def _start(rm: RuntimeManager, text: str, node: str) -> str:
    driver = Driver(rm, pod_from(text, node=node))
    status = await driver.until(lambda s: s.phase == "Running")
    return status.podIP or ""


def _read(path: str) -> str:
    return Path(path).read_text()


def _host_default() -> str:
    host = parse_resolv_conf(_read("/etc/resolv.conf"))
    lines = [f"nameserver {s}" for s in host.nameservers if not s.startswith("127.")]
    if host.searches:
        lines.append("search " + " ".join(host.searches))
    if host.options:
        lines.append("options " + " ".join(host.options))
    return "\n".join(lines) + "\n"


async def test_cluster_first_gives_every_container_the_cluster_resolver_and_managed_hosts(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder())
    ip = await _start(rm, _pod("  dnsPolicy: ClusterFirst"), node_name)
    host = parse_resolv_conf(_read("/etc/resolv.conf"))
    cluster = ["shop.svc.cluster.local", "svc.cluster.local", "cluster.local"]
    searches = " ".join(dict.fromkeys(cluster + list(host.searches)))
    want = f"nameserver 10.96.0.10\nsearch {searches}\noptions ndots:5\n"
    for container in ("one", "two"):
        resolv, hosts = await _files(docker, node_name, container)
        assert resolv == want
        assert hosts == HEADER + f"{ip}\tdns\n"


async def test_cluster_first_without_cluster_dns_falls_back_to_default_with_an_event(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin
) -> None:
    events = Recorder()
    rm = _manager(docker, node_name, backend_plugin, DNSSettings(), events)
    await _start(rm, _pod("  dnsPolicy: ClusterFirst"), node_name)
    resolv, _ = await _files(docker, node_name, "one")
    assert resolv == _host_default()
    missing = [e for e in events.events if e[1] == "MissingClusterDNS"]
    assert missing
    assert missing[0][0] == "Warning"
    assert missing[0][2].endswith(
        "kubelet does not have ClusterDNS IP configured and cannot create Pod using "
        '"ClusterFirst" policy. Falling back to "Default" policy.'
    )


async def test_default_gives_the_hosts_resolver_without_loopback_nameservers(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder())
    await _start(rm, _pod("  dnsPolicy: Default"), node_name)
    resolv, _ = await _files(docker, node_name, "two")
    assert resolv == _host_default()


async def test_none_with_dns_config_gives_exactly_the_dns_config(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder())
    spec = """  dnsPolicy: "None"
  dnsConfig:
    nameservers: ["192.0.2.10", "192.0.2.11"]
    searches: ["a.example", "b.example"]
    options: [{name: ndots, value: "2"}, {name: edns0}]"""
    await _start(rm, _pod(spec), node_name)
    resolv, _ = await _files(docker, node_name, "one")
    assert resolv == (
        "nameserver 192.0.2.10\nnameserver 192.0.2.11\nsearch a.example b.example\n"
        "options ndots:2 edns0\n"
    )


async def test_hostname_subdomain_and_host_aliases_are_in_the_hosts_file(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder())
    spec = """  hostname: db-0
  subdomain: db
  hostAliases:
  - {ip: "127.0.0.1", hostnames: ["foo.local", "bar.local"]}"""
    ip = await _start(rm, _pod(spec), node_name)
    _, hosts = await _files(docker, node_name, "two")
    assert hosts == HEADER + (
        f"{ip}\tdb-0.db.shop.svc.cluster.local\tdb-0\n"
        "\n# Entries added by HostAliases.\n127.0.0.1\tfoo.local\tbar.local\n"
    )


async def test_cluster_first_with_host_net_uses_cluster_dns_and_the_nodes_hosts(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder())
    spec = "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet"
    await _start(rm, _pod(spec), node_name)
    resolv, hosts = await _files(docker, node_name, "one")
    assert resolv.startswith("nameserver 10.96.0.10\nsearch shop.svc.cluster.local ")
    assert hosts == _read("/etc/hosts")


async def test_set_hostname_as_fqdn_makes_the_fqdn_every_containers_hostname(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder())
    spec = "  hostname: db-0\n  subdomain: db\n  setHostnameAsFQDN: true"
    await _start(rm, _pod(spec), node_name)
    rows = await docker.list_containers(labels={naming.LABEL_NODE: node_name})
    for row in rows:
        if (row.get("Labels") or {}).get(naming.LABEL_TYPE) != naming.TYPE_CONTAINER:
            continue
        seen = await docker.exec_run(row["Id"], ["hostname"], timeout=10)
        assert seen.stdout.decode().strip() == "db-0.db.shop.svc.cluster.local"
