"""The kubelet's ``generatePodSandboxConfig`` as a table: what a pod's sandbox is made with
(name, hostname, DNS, ports, labels, cgroup parent, log directory), decided before any
I/O, and how that is rendered for Docker."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.network import PodDNS, PortMapping, SandboxExtra
from asynckubelet.runtime import naming
from asynckubelet.runtime.poddns import DNSSettings, ResolverConfig
from asynckubelet.runtime.sandbox import (
    PodSandboxConfig,
    generate_pod_sandbox_config,
    pod_network_request,
    sandbox_docker_config,
)

NODE_RESOLVER = ResolverConfig(
    nameservers=("192.0.2.53",), searches=("corp.example",), options=("edns0",)
)
CLUSTER = DNSSettings(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local")
NO_CLUSTER_DNS = DNSSettings()
CLUSTER_SEARCHES = ("team.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example")


def make_pod(
    *,
    name: str = "web",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    containers: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> Pod:
    return builders.pod(
        name,
        namespace="team",
        uid="u-1",
        labels=labels or {},
        annotations=annotations or {},
        containers=containers or None,
        **spec,
    )


@dataclass(frozen=True)
class Case:
    id: str
    pod: Pod
    expect: dict[str, Any]
    """Fields of the PodSandboxConfig and their expected values."""
    settings: dict[str, Any] = field(default_factory=dict)


CASES = [
    # -- name and hostname
    Case(
        "the name is cri-dockerd's with our prefix", make_pod(), {"name": "akl_POD_web_team_u-1_3"}
    ),
    Case("the hostname is the pod name", make_pod(), {"hostname": "web"}),
    Case("spec.hostname wins over the pod name", make_pod(hostname="h1"), {"hostname": "h1"}),
    Case(
        "a long pod name is cut to 63 characters, without a trailing dash",
        make_pod(name="a" * 62 + "-b"),
        {"hostname": "a" * 62},
    ),
    Case(
        "a subdomain alone leaves the short hostname",
        make_pod(hostname="h1", subdomain="sub"),
        {"hostname": "h1"},
    ),
    Case(
        "setHostnameAsFQDN makes hostname.subdomain.namespace.svc.domain the hostname",
        make_pod(hostname="h1", subdomain="sub", setHostnameAsFQDN=True),
        {"hostname": "h1.sub.team.svc.cluster.local"},
        {"dns": CLUSTER},
    ),
    Case(
        "a host-network pod has the node's hostname",
        make_pod(hostNetwork=True, hostname="h1"),
        {"hostname": None, "host_network": True},
    ),
    # -- DNS
    Case(
        "ClusterFirst: the cluster's server, the namespace's searches, ndots:5",
        make_pod(),
        {"dns": ResolverConfig(("10.96.0.10",), CLUSTER_SEARCHES, ("ndots:5",))},
        {"dns": CLUSTER},
    ),
    Case(
        "ClusterFirst without cluster DNS falls back to the node's resolver",
        make_pod(),
        {"dns": NODE_RESOLVER},
    ),
    Case(
        "Default: the node's resolver",
        make_pod(dnsPolicy="Default"),
        {"dns": NODE_RESOLVER},
        {"dns": CLUSTER},
    ),
    Case(
        "None: only the pod's dnsConfig",
        make_pod(
            dnsPolicy="None",
            dnsConfig={"nameservers": ["1.1.1.1"], "searches": ["x.test"], "options": []},
        ),
        {"dns": ResolverConfig(("1.1.1.1",), ("x.test",), ())},
        {"dns": CLUSTER},
    ),
    Case("a host-network pod has the node's DNS", make_pod(hostNetwork=True), {"dns": None}),
    # -- ports
    Case(
        "hostPorts of init and app containers, in order; ports without one are not mapped",
        make_pod(
            initContainers=[
                {
                    "name": "i",
                    "image": "x",
                    "ports": [{"containerPort": 53, "hostPort": 1053, "protocol": "UDP"}],
                },
            ],
            containers=[
                {
                    "name": "a",
                    "image": "x",
                    "ports": [
                        {"containerPort": 80},
                        {"containerPort": 443, "hostPort": 8443, "hostIP": "127.0.0.1"},
                    ],
                },
            ],
        ),
        {
            "port_mappings": (
                PortMapping(container_port=53, host_port=1053, protocol="UDP"),
                PortMapping(container_port=443, host_port=8443, host_ip="127.0.0.1"),
            )
        },
    ),
    Case("no hostPorts, no mappings", make_pod(), {"port_mappings": ()}),
    # -- cgroup parent
    Case("pod cgroups off: no cgroup parent", make_pod(), {"cgroup_parent": None}),
    Case(
        "a BestEffort pod under cgroupfs",
        make_pod(),
        {"cgroup_parent": "/akl/besteffort/podu-1"},
        {"cgroup_root": "/akl"},
    ),
    Case(
        "a Guaranteed pod under cgroupfs sits at the root",
        make_pod(
            containers=[
                {
                    "name": "a",
                    "image": "x",
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "1", "memory": "1Gi"},
                    },
                }
            ]
        ),
        {"cgroup_parent": "/akl/podu-1"},
        {"cgroup_root": "/akl"},
    ),
    Case(
        "a BestEffort pod under systemd is a slice",
        make_pod(),
        {"cgroup_parent": "akl-besteffort-podu_1.slice"},
        {"cgroup_root": "/akl", "cgroup_driver": "systemd"},
    ),
    # -- log directory
    Case("log links off: no log directory", make_pod(), {"log_directory": None}),
    Case(
        "the log directory is <namespace>_<name>_<uid> below the root",
        make_pod(),
        {"log_directory": Path("/var/log/pods/team_web_u-1")},
        {"log_root": Path("/var/log/pods")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_sandbox_config_follows_the_kubelets_rules(case: Case) -> None:
    settings: dict[str, Any] = {"dns": NO_CLUSTER_DNS, **case.settings}
    config = generate_pod_sandbox_config(
        case.pod, node="n1", attempt=3, node_resolver=NODE_RESOLVER, **settings
    )
    assert {k: getattr(config, k) for k in case.expect} == case.expect


@pytest.mark.parametrize(("host_network", "value"), [(False, "false"), (True, "true")])
def test_the_labels_are_the_pods_its_annotations_and_ours(host_network: bool, value: str) -> None:
    pod = make_pod(labels={"app": "web"}, annotations={"team": "a"}, hostNetwork=host_network)
    config = generate_pod_sandbox_config(
        pod, node="n1", attempt=2, dns=NO_CLUSTER_DNS, node_resolver=NODE_RESOLVER
    )
    assert config.labels == {
        "app": "web",
        f"{naming.ANNOTATION_PREFIX}team": "a",
        **naming.pod_labels(node="n1", pod="web", namespace="team", uid="u-1"),
        naming.LABEL_TYPE: naming.TYPE_SANDBOX,
        naming.LABEL_ATTEMPT: "2",
        naming.LABEL_HOST_NETWORK: value,
    }


def test_an_fqdn_over_64_characters_is_refused_with_the_kubelets_message() -> None:
    pod = make_pod(hostname="h" * 40, subdomain="s" * 20, setHostnameAsFQDN=True)
    with pytest.raises(errors.SandboxError, match=r"FQDN .* is too long"):
        generate_pod_sandbox_config(
            pod, node="n1", attempt=0, dns=CLUSTER, node_resolver=NODE_RESOLVER
        )


def config_of(pod: Pod, **settings: Any) -> PodSandboxConfig:
    return generate_pod_sandbox_config(
        pod,
        node="n1",
        attempt=0,
        dns=settings.pop("dns", CLUSTER),
        node_resolver=NODE_RESOLVER,
        **settings,
    )


def test_docker_gets_the_hostname_cgroup_parent_and_the_backends_additions() -> None:
    pod = make_pod()
    extra = SandboxExtra(
        host_config={"PortBindings": {"80/tcp": [{"HostPort": "8080"}]}},
        exposed_ports={"80/tcp": {}},
    )
    docker = sandbox_docker_config(
        pod, config_of(pod, cgroup_root="/akl"), image="pause", network_mode="akl-n1", extra=extra
    )
    assert docker["Image"] == "pause"
    assert docker["Hostname"] == "web"
    assert docker["ExposedPorts"] == {"80/tcp": {}}
    host = docker["HostConfig"]
    assert (host["NetworkMode"], host["IpcMode"]) == ("akl-n1", "shareable")
    assert host["CgroupParent"] == "/akl/besteffort/podu-1"
    assert host["PortBindings"] == {"80/tcp": [{"HostPort": "8080"}]}
    assert "Dns" not in host


def test_a_remote_engine_gets_the_pods_dns_as_host_config_keys() -> None:
    pod = make_pod(hostAliases=[{"ip": "10.0.0.9", "hostnames": ["db"]}])
    host = sandbox_docker_config(
        pod, config_of(pod), image="pause", network_mode="akl-n1", engine_dns_keys=True
    )["HostConfig"]
    assert host["Dns"] == ["10.96.0.10"]
    assert host["DnsSearch"] == list(CLUSTER_SEARCHES)
    assert host["DnsOptions"] == ["ndots:5"]
    assert host["ExtraHosts"] == ["db:10.0.0.9"]


def test_a_host_network_sandbox_gets_no_hostname_and_no_dns_keys() -> None:
    pod = make_pod(hostNetwork=True)
    docker = sandbox_docker_config(
        pod, config_of(pod), image="pause", network_mode="host", engine_dns_keys=True
    )
    assert "Hostname" not in docker
    assert "Dns" not in docker["HostConfig"]


def test_the_network_request_carries_the_netns_ports_dns_and_asked_addresses() -> None:
    pod = make_pod(
        annotations={"cni.projectcalico.org/ipAddrs": '["10.138.0.50"]'},
        containers=[{"name": "a", "image": "x", "ports": [{"containerPort": 80, "hostPort": 80}]}],
    )
    request = pod_network_request(pod, config_of(pod), sandbox_id="sb1", pid=42)
    assert (request.pod_name, request.namespace, request.uid) == ("web", "team", "u-1")
    assert request.netns_path == "/proc/42/ns/net"
    assert request.port_mappings == (PortMapping(container_port=80, host_port=80),)
    assert request.dns == PodDNS(
        servers=("10.96.0.10",), searches=CLUSTER_SEARCHES, options=("ndots:5",)
    )
    assert request.ips == ("10.138.0.50",)


def test_a_sandbox_without_a_known_process_has_no_netns_path() -> None:
    pod = make_pod()
    assert pod_network_request(pod, config_of(pod), sandbox_id="sb1", pid=0).netns_path == ""


@pytest.mark.parametrize(("mode", "disabled"), [("none", True), ("host", False), ("akl-n1", False)])
def test_docker_leaves_the_network_alone_only_for_a_namespace_the_backend_makes(
    mode: str, disabled: bool
) -> None:
    pod = make_pod()
    docker = sandbox_docker_config(
        pod, config_of(pod), image="pause", network_mode=mode, network_disabled=True
    )
    assert docker.get("NetworkDisabled", False) is disabled
    assert "NetworkDisabled" not in sandbox_docker_config(
        pod, config_of(pod), image="pause", network_mode=mode
    )
