"""Where manifest text reaches the host, the builder itself refuses anything malformed.

Validation refuses these values first; these tests call the builders directly with hostile
values, as code that skipped validation would, and expect the project's error, never text
with a line of the attacker's choosing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lightkube.models.core_v1 import (
    AppArmorProfile,
    Container,
    HostAlias,
    Pod,
    PodSpec,
    SeccompProfile,
    SecurityContext,
)
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors
from asynckubelet.network import PodNetworkRequest
from asynckubelet.network.cniexec import cni_args
from asynckubelet.network.firewall import DNAT
from asynckubelet.network.iptables import IPTables
from asynckubelet.network.nftables import NFTables
from asynckubelet.runtime.poddns import (
    DNSSettings,
    ResolverConfig,
    engine_dns,
    managed_hosts,
    parse_resolv_conf,
    pod_files,
)
from asynckubelet.runtime.security import host_config_security

SANDBOX = "0123456789abcdef" * 4
UID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
NFT_LINE = "127.0.0.1\nadd rule ip filter input accept"


# -- firewall rules ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"host_ip": NFT_LINE},
        {"host_ip": "fe80::1%eth0"},
        {"host_ip": "0.0.0.0 -j ACCEPT"},
        {"host_ip": "localhost"},
        {"pod_ip": "10.0.0.5\nflush ruleset"},
        {"pod_ip": ""},
        {"protocol": "tcp\nflush ruleset"},
        {"protocol": "icmp"},
        {"host_port": 0},
        {"host_port": 70000},
        {"host_port": True},
        {"container_port": "80"},
    ],
    ids=lambda f: f"{next(iter(f))}={next(iter(f.values()))!r}",
)
def test_a_dnat_rule_refuses_a_value_that_is_not_what_it_names(fields: dict[str, Any]) -> None:
    values: dict[str, Any] = {"host_port": 8080, "pod_ip": "10.0.0.5", "container_port": 80}
    values.update(fields)
    with pytest.raises(errors.NetworkError, match="hostPort rule"):
        DNAT(**values)


def test_a_dnat_rule_takes_addresses_of_both_families_and_any_case_of_protocol() -> None:
    DNAT(8080, "fd00::5", 80, protocol="udp", host_ip="::1")
    DNAT(8080, "10.0.0.5", 80, protocol="SCTP", host_ip="127.0.0.1")


def test_an_nft_batch_refuses_a_sandbox_id_that_is_not_hexadecimal() -> None:
    with pytest.raises(errors.NetworkError, match="sandbox id must be hexadecimal"):
        NFTables(family="ip").hostports_script(
            bridge="akl0", sandbox_id="abc\nflush ruleset", maps=[DNAT(80, "10.0.0.5", 80)]
        )


def test_an_nft_batch_refuses_rules_that_were_never_checked() -> None:
    class Forged:
        host_ip = NFT_LINE
        host_port = 80
        protocol = "tcp"

        def destination(self) -> str:
            return "10.0.0.5:80"

    with pytest.raises(errors.NetworkError, match="DNAT records"):
        NFTables(family="ip").hostports_script(
            bridge="akl0",
            sandbox_id=SANDBOX,
            maps=[Forged()],  # type: ignore[list-item]
        )


@pytest.mark.anyio
async def test_iptables_refuses_a_sandbox_id_before_running_anything() -> None:
    tables = IPTables(binary="/nonexistent/iptables")
    with pytest.raises(errors.NetworkError, match="sandbox id must be hexadecimal"):
        await tables.add_hostports(
            bridge="akl0", sandbox_id="x\n-A INPUT -j ACCEPT", maps=[DNAT(80, "10.0.0.5", 80)]
        )


# -- resolv.conf and /etc/hosts ------------------------------------------------------------


@pytest.mark.parametrize(
    "resolver",
    [
        ResolverConfig(nameservers=("1.1.1.1\nnameserver 6.6.6.6",)),
        ResolverConfig(nameservers=("fe80::1%eth0\nx",)),
        ResolverConfig(nameservers=("dns.example",)),
        ResolverConfig(nameservers=("10.0.0.10",), searches=("a.example\nnameserver 6.6.6.6",)),
        ResolverConfig(nameservers=("10.0.0.10",), searches=("a b",)),
        ResolverConfig(nameservers=("10.0.0.10",), options=("ndots:1\nnameserver 6.6.6.6",)),
        ResolverConfig(nameservers=("10.0.0.10",), options=("",)),
    ],
    ids=["nameserver line", "zone line", "name", "search line", "search space", "option", "empty"],
)
def test_resolv_conf_refuses_an_entry_that_is_not_one_word(resolver: ResolverConfig) -> None:
    with pytest.raises(errors.SandboxError, match="refusing to write it"):
        resolver.render()


def test_resolv_conf_keeps_the_zone_of_a_link_local_nameserver() -> None:
    resolver = ResolverConfig(nameservers=("fe80::1%eth0", "10.0.0.10"), searches=("svc.local",))
    assert resolver.render() == "nameserver fe80::1%eth0\nnameserver 10.0.0.10\nsearch svc.local\n"


def test_a_nodes_resolv_conf_nameserver_that_is_no_address_is_skipped_as_libc_skips_it() -> None:
    parsed = parse_resolv_conf("nameserver dns.example\nnameserver 10.0.0.10\n")
    assert parsed.nameservers == ("10.0.0.10",)


def pod(**spec: Any) -> Pod:
    spec.setdefault("containers", [Container(name="app", image="nginx")])
    return Pod(metadata=ObjectMeta(name="web", namespace="shop", uid=UID), spec=PodSpec(**spec))


@pytest.mark.parametrize(
    "aliases",
    [
        [HostAlias(ip="127.0.0.1\n6.6.6.6", hostnames=["bank.example"])],
        [HostAlias(ip="10.0.0.1", hostnames=["bank.example\n6.6.6.6 evil.example"])],
        [HostAlias(ip="10.0.0.1", hostnames=["a b"])],
        [HostAlias(ip="not-an-ip", hostnames=["a"])],
    ],
    ids=["ip line", "hostname line", "hostname space", "ip name"],
)
def test_the_hosts_file_refuses_an_alias_that_is_not_an_address_and_words(
    aliases: list[HostAlias],
) -> None:
    with pytest.raises(errors.SandboxError, match="refusing to write it"):
        managed_hosts(
            pod(hostAliases=aliases), pod_ips=["10.1.0.5"], cluster_domain="cluster.local"
        )
    with pytest.raises(errors.SandboxError, match="refusing to write it"):
        engine_dns(pod(hostAliases=aliases), resolver=ResolverConfig())


def test_the_hosts_file_refuses_a_hostname_or_pod_ip_that_is_not_one_word() -> None:
    with pytest.raises(errors.SandboxError):
        managed_hosts(pod(hostname="web\n6.6.6.6"), pod_ips=["10.1.0.5"], cluster_domain="c.l")
    with pytest.raises(errors.SandboxError):
        managed_hosts(pod(), pod_ips=["10.1.0.5\n6.6.6.6 x"], cluster_domain="c.l")


def test_a_pods_files_refuse_a_dns_config_that_skipped_validation() -> None:
    from lightkube.models.core_v1 import PodDNSConfig

    hostile = pod(dnsPolicy="None", dnsConfig=PodDNSConfig(nameservers=["1.1.1.1\nsearch x"]))
    with pytest.raises(errors.SandboxError):
        pod_files(
            hostile,
            settings=DNSSettings(),
            pod_ips=["10.1.0.5"],
            host_resolv_text="",
            node_hosts_text="",
        )


def test_a_remote_engines_dns_keys_refuse_what_the_files_refuse() -> None:
    with pytest.raises(errors.SandboxError):
        engine_dns(pod(), resolver=ResolverConfig(nameservers=("1.1.1.1\n",)))


# -- CNI_ARGS ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"namespace": "shop;IP=10.0.0.1"},
        {"pod_name": "web;K8S_POD_NAME=other"},
        {"uid": "u=1"},
        {"uid": ""},
        {"sandbox_id": "abc\0def"},
        {"pod_name": "web\n"},
    ],
    ids=lambda f: next(iter(f)),
)
def test_cni_args_refuse_a_value_that_would_add_an_argument(fields: dict[str, str]) -> None:
    values: dict[str, Any] = {
        "sandbox_id": SANDBOX,
        "pod_name": "web",
        "namespace": "shop",
        "uid": UID,
    }
    values.update(fields)
    with pytest.raises(errors.NetworkError, match="CNI_ARGS"):
        cni_args(PodNetworkRequest(**values))


def test_cni_args_carry_the_pod_as_the_kubelet_does() -> None:
    request = PodNetworkRequest(sandbox_id=SANDBOX, pod_name="web", namespace="shop", uid=UID)
    assert cni_args(request) == (
        f"IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web;"
        f"K8S_POD_INFRA_CONTAINER_ID={SANDBOX};K8S_POD_UID={UID}"
    )


# -- seccomp and AppArmor profiles ---------------------------------------------------------


def secured(context: SecurityContext) -> tuple[Pod, Container]:
    container = Container(name="app", image="nginx", securityContext=context)
    return pod(containers=[container]), container


def seccomp(name: str) -> SecurityContext:
    return SecurityContext(seccompProfile=SeccompProfile(type="Localhost", localhostProfile=name))


@pytest.mark.parametrize(
    "name",
    ["../escape.json", "/etc/passwd", "a/../../escape.json", "", "a\0b", "link.json"],
    ids=["climb", "absolute", "inner climb", "empty", "nul", "symlink out"],
)
def test_a_localhost_seccomp_profile_outside_the_profile_root_is_refused(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / "seccomp"
    root.mkdir()
    (tmp_path / "escape.json").write_text("{}")
    (root / "link.json").symlink_to(tmp_path / "escape.json")
    target, container = secured(seccomp(name))
    with pytest.raises(errors.ContainerConfigError):
        host_config_security(target, container, seccomp_root=root)


@pytest.mark.parametrize("text", ["unconfined", "[]", "not json"])
def test_a_localhost_seccomp_profile_must_be_a_json_profile(tmp_path: Path, text: str) -> None:
    (tmp_path / "p.json").write_text(text)
    target, container = secured(seccomp("p.json"))
    with pytest.raises(errors.ContainerConfigError, match="not a JSON seccomp profile"):
        host_config_security(target, container, seccomp_root=tmp_path)


def test_a_localhost_seccomp_profile_in_a_subdirectory_is_read(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    profile = {"defaultAction": "SCMP_ACT_ALLOW"}
    (tmp_path / "profiles" / "audit.json").write_text(json.dumps(profile))
    target, container = secured(seccomp("profiles/audit.json"))
    host = host_config_security(target, container, seccomp_root=tmp_path)
    assert host["SecurityOpt"] == [f"seccomp={json.dumps(profile)}"]


@pytest.mark.parametrize("name", ["unconfined", "p\nq", "p q"])
def test_an_apparmor_profile_name_that_is_not_one_profile_is_refused(name: str) -> None:
    profile = AppArmorProfile(type="Localhost", localhostProfile=name)
    target, container = secured(SecurityContext(appArmorProfile=profile))
    with pytest.raises(errors.ContainerConfigError, match="AppArmor localhostProfile"):
        host_config_security(target, container)


def test_an_apparmor_profile_name_reaches_the_engine() -> None:
    profile = AppArmorProfile(type="Localhost", localhostProfile="k8s-apparmor-example")
    target, container = secured(SecurityContext(appArmorProfile=profile))
    host = host_config_security(target, container)
    assert "apparmor=k8s-apparmor-example" in host["SecurityOpt"]
