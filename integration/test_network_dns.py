"""resolv.conf and /etc/hosts inside real pods, per dnsPolicy, as every container sees them,
on each network backend (bridge, cni, docker): the files are the kubelet's whatever the
backend, whether they are the sandbox's files of Docker's (a runtime without a node's pod
directories) or the node's own, mounted into each container (with the node's volume
manager: the sandbox is then ``NetworkDisabled`` on the bridge and cni backends)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.network import NetworkPlugin
from asynckubelet.node.volumes import VolumeManager
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.poddns import DNSSettings, parse_resolv_conf
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


@pytest.fixture(params=["docker-files", "node-files"])
def pod_files(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    """Where the pods' files come from: the sandbox's of Docker's, or the node's pod
    directories (this root)."""
    return tmp_path / "pods" if request.param == "node-files" else None


def _manager(
    docker: DockerClient,
    node: str,
    backend_plugin: NetworkPlugin,
    dns: DNSSettings,
    events: Recorder,
    pod_files: Path | None = None,
) -> RuntimeManager:
    volumes = None
    if pod_files is not None:
        volumes = VolumeManager(root=pod_files, node_name=node, use_tmpfs=False)
    return RuntimeManager(
        RuntimeConfig(node_name=node, pause_image=PAUSE_IMAGE, dns=dns),
        docker=docker,
        network=backend_plugin,
        events=events,
        volumes=volumes,
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
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin, pod_files: Path | None
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder(), pod_files)
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
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin, pod_files: Path | None
) -> None:
    events = Recorder()
    rm = _manager(docker, node_name, backend_plugin, DNSSettings(), events, pod_files)
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
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin, pod_files: Path | None
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder(), pod_files)
    await _start(rm, _pod("  dnsPolicy: Default"), node_name)
    resolv, _ = await _files(docker, node_name, "two")
    assert resolv == _host_default()


async def test_none_with_dns_config_gives_exactly_the_dns_config(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin, pod_files: Path | None
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder(), pod_files)
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
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin, pod_files: Path | None
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder(), pod_files)
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
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin, pod_files: Path | None
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder(), pod_files)
    spec = "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet"
    await _start(rm, _pod(spec), node_name)
    resolv, hosts = await _files(docker, node_name, "one")
    assert resolv.startswith("nameserver 10.96.0.10\nsearch shop.svc.cluster.local ")
    assert hosts == _read("/etc/hosts")


async def test_set_hostname_as_fqdn_makes_the_fqdn_every_containers_hostname(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin, pod_files: Path | None
) -> None:
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder(), pod_files)
    spec = "  hostname: db-0\n  subdomain: db\n  setHostnameAsFQDN: true"
    await _start(rm, _pod(spec), node_name)
    rows = await docker.list_containers(labels={naming.LABEL_NODE: node_name})
    for row in rows:
        if (row.get("Labels") or {}).get(naming.LABEL_TYPE) != naming.TYPE_CONTAINER:
            continue
        seen = await docker.exec_run(row["Id"], ["hostname"], timeout=10)
        assert seen.stdout.decode().strip() == "db-0.db.shop.svc.cluster.local"


async def test_a_namespace_the_backend_makes_is_left_to_it_with_its_loopback_up(
    docker: DockerClient, node_name: str, backend_plugin: NetworkPlugin, tmp_path: Path
) -> None:
    """With the node's pod directories, Docker builds no network sandbox for a pause
    container in a namespace the backend sets up (bridge, cni); the namespace's loopback
    interface is up all the same, and each container mounts the node's files."""
    root = tmp_path / "pods"
    rm = _manager(docker, node_name, backend_plugin, CLUSTER_DNS, Recorder(), root)
    await _start(rm, _pod("  dnsPolicy: ClusterFirst"), node_name)
    rows = await docker.list_containers(labels={naming.LABEL_NODE: node_name})
    kinds = {r["Id"]: (r.get("Labels") or {}).get(naming.LABEL_TYPE) for r in rows}
    (sandbox,) = [cid for cid, kind in kinds.items() if kind == naming.TYPE_SANDBOX]
    own = backend_plugin.name != "docker"
    info = await docker.inspect_container(sandbox)
    assert bool(info.get("Config", {}).get("NetworkDisabled")) is own
    for cid in [cid for cid, kind in kinds.items() if kind == naming.TYPE_CONTAINER]:
        link = await docker.exec_run(cid, ["ip", "link", "show", "lo"], timeout=10)
        assert ",UP" in link.stdout.decode()
        mounts = {
            m.get("Destination"): m.get("Source")
            for m in (await docker.inspect_container(cid)).get("Mounts") or []
        }
        hosts = str(mounts.get("/etc/hosts") or "")
        assert hosts.startswith(str(root)) is own
